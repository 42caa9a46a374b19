"""`memory://`: the reference backend in plain Python, for tests and as the spec."""
