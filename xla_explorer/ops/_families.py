"""Imports every family module, so that each registers its ops (see registry._load_families)."""
from . import (  # noqa: F401
    collective, control, custom_call, elementwise, indexing, linalg, reduction, rng, shape, slicing,
)
