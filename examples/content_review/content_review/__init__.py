"""An example Waystation plug-in: a content-review agent with two human gates."""
