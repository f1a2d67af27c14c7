"""The spec layer: one module per op family, each op defined once (see registry).

The public op functions are exported wrapped by ``builder.public_op``: one place that makes
every op a transaction and turns a bad call into an error naming the op and argument."""
import inspect as _inspect

from ..builder import public_op as _public_op
from . import registry
from ._families import (collective, control, custom_call, elementwise, indexing, linalg, reduction,  # noqa: F401
                        rng, shape, slicing)

_PUBLIC = []
_wrapped = {}  # one wrapper per function: aliases (LogicalNot is Not) stay aliases
for _mod in (elementwise, shape, slicing, indexing, reduction, linalg, control, collective, rng, custom_call):
    for _name in getattr(_mod, "__all__", ()):
        _fn = getattr(_mod, _name)
        if _inspect.isfunction(_fn) and _name[0].isupper():
            _fn = _wrapped.setdefault(id(_fn), _public_op(_fn))
        globals()[_name] = _fn
        _PUBLIC.append(_name)

__all__ = list(_PUBLIC)
