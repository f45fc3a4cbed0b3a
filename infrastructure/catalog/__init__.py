"""The session catalog: listing rows, filters and their derived cache."""
