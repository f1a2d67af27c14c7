"""slicing ops (being written)."""
__all__ = []
