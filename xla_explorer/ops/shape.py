"""shape ops (being written)."""
__all__ = []
