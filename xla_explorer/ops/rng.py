"""rng ops (being written)."""
__all__ = []
