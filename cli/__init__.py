"""The ``pentrace`` operator CLI: a thin typer layer over the library."""
