"""textkit: small text utilities, grown one brief at a time."""
