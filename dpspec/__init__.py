"""dpspec."""
