"""The mobile agent's side effects: device drivers, the UI-hierarchy parser, screen identity,
the artifact store and the step activity that writes the screen graph."""
