"""Pure parts of the analytics projections: the event they read and the rules they apply."""
