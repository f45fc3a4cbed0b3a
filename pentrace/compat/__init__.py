"""Drop-in replacements for the public functions of the systems pentrace replaces."""
