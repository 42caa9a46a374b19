"""Measurements a user can run against their own install (`partner-memory bench ...`)."""
