"""The bottom layer every other package may import: statuses, the event vocabulary and the
write models a run sends to its read model. It imports neither the database driver nor the
API, so workflow code (and a plug-in's workflow code) can use it inside the sandbox."""
