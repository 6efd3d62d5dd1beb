"""Layout module (to be written)."""
