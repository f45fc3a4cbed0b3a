"""Pure domain types and rules: no files, no SQL, no clock read implicitly."""
