"""The live path: index new records as they are saved, in the background, and follow the head."""
