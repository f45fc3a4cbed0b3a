"""Session commands: list, show, delete, replay, export, import, fork and prune."""
