"""Audit and secret scans: checks over sessions and derived stores, and the safe repairs."""
