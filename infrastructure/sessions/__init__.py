"""Whole sessions on disk: handles, export, import, archive, fork, prune, metadata, references."""
