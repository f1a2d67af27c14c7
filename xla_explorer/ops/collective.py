"""collective ops (being written)."""
__all__ = []
