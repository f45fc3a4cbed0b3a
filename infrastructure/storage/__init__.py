"""The data root on disk: layout, names, file modes, atomic publishing and user-given paths."""
