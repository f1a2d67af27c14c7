"""The spec layer: one module per op family, each op defined once (see registry)."""
from . import registry
from ._families import (collective, control, custom_call, elementwise, indexing, linalg, reduction,  # noqa: F401
                        rng, shape, slicing)

_PUBLIC = []
for _mod in (elementwise, shape, slicing, indexing, reduction, linalg, control, collective, rng, custom_call):
    for _name in getattr(_mod, "__all__", ()):
        globals()[_name] = getattr(_mod, _name)
        _PUBLIC.append(_name)

__all__ = list(_PUBLIC)
