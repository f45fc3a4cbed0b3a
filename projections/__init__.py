"""Pure folds over trace records: resume, replay and analytics read models."""
