"""CustomCall: a registry of targets (``custom_call_target="..."``).

A target registers ``shape_rule(*operand_shapes, result_shape, **attrs)`` (optional:
the result shape in the HLO is trusted otherwise) and ``reference(*values, shape, ctx,
**attrs)``.  The attributes a target sees are the custom-call's: ``backend_config``
(raw text), ``api_version``, ``frontend_attributes`` (raw), and ``called_computations``.
An unknown target raises an error naming it.
"""
from ..errors import ShapeError
from ..hlo.attrs import Attr
from .arguments import describe
from . import registry

#: target name -> (reference, shape_rule or None)
TARGETS = {}


def register_target(name, reference, shape_rule=None):
    if name in TARGETS:
        raise ValueError(f"custom-call target {name!r} registered twice")
    TARGETS[name] = (reference, shape_rule)


def _shape_rule(*operand_shapes, custom_call_target, shape=None, **attrs):
    if shape is None:
        raise ShapeError(f"CustomCall: target {custom_call_target!r} needs its result shape "
                         "(pass shape=...)")
    entry = TARGETS.get(custom_call_target)
    if entry is not None and entry[1] is not None:
        entry[1](*operand_shapes, shape=shape, **attrs)
    return shape


def _reference(*values, shape, ctx, custom_call_target, **attrs):
    entry = TARGETS.get(custom_call_target)
    if entry is None:
        known = ", ".join(sorted(TARGETS)) or "none"
        raise NotImplementedError(f"CustomCall: target {custom_call_target!r} is not implemented "
                                  f"(known targets: {known})")
    attrs.pop("shape", None)
    return entry[0](*values, shape=shape, ctx=ctx, **attrs)


def CustomCall(call_target_name, operands, shape, backend_config=None, has_side_effect=False):
    """Wraps XLA's CustomCall: ``CustomCall("myfunc", [x, y], "f32[3,3]")`` calls target
    ``call_target_name`` on ``operands``; the result ``shape`` must be given, as XLA cannot
    infer it.  Only registered targets run (``TARGETS``); others raise an error naming them."""
    from ..builder import apply_op
    from ..shapes import as_shape
    attrs = {"custom_call_target": call_target_name, "shape": as_shape(shape)}
    if backend_config is not None:
        attrs["backend_config"] = backend_config
    attrs["custom_call_has_side_effect"] = has_side_effect   # a bool (the attribute schema checks it)
    return apply_op("custom-call", list(operands), attrs)


registry.register(
    "custom-call", "CustomCall", "custom_call", _shape_rule, _reference, needs_context=True,
    attrs=(Attr("custom_call_target", "qstr"),
           Attr("custom_call_has_side_effect", "bool", default=False),
           Attr("backend_config", "raw", default=None),
           Attr("api_version", "str", default=None),
           Attr("called_computations", "computations", default=None),
           # kept raw for the targets that read them (the SPMD ones, see executors.spmd)
           Attr("sharding", "raw", default=None),
           Attr("frontend_attributes", "raw", default=None)),
    # the result shape of a custom-call is only known from the HLO text or the caller
    attrs_from_shape=lambda shape: {"shape": shape},
    categories=("other",))
describe("custom-call", call_target_name={"kind": "str"}, shape={"kind": "shape"},
         backend_config={"kind": "str"}, has_side_effect={"kind": "bool"},
         example={"call_target_name": "my_target", "operands": ["f32[2,3]"], "shape": "f32[3]"})

__all__ = ["CustomCall", "register_target", "TARGETS"]
