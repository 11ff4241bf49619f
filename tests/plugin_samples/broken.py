"""A plug-in whose import fails."""

raise RuntimeError("this plug-in is broken on purpose")
