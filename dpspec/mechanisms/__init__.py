"""Runtime mechanism objects (numpy; torch imported lazily by the trainers) and their declarations."""
