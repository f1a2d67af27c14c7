"""The reliability fuzzing kit (used by tests/test_fuzz.py and scripts/probe_reliability.py).

- ``examples()``: one legal call of every registered op, arrays as NumPy values (the
  element-wise ops' operand types are found by trying, so a new op is covered at once);
- ``bad_values(attr, kw)``: illegal values for an attribute, generated from the kind of
  its schema entry (``Attr("dimensions", "ints")`` -> ``[2.9]``, ``"01"``, ``[True]``, ...),
  each marked whether it must be refused or may be legal;
- ``mutations(text, rng)``: hand-edits of real HLO text (the corpus);
- ``Worker``: a process in which cases run, so that a crash (a signal), a hang or a memory
  blow-up is observed and counted, not fatal; it restarts after one;
- ``classify``: the verdict on an outcome -- a project error naming the op (or the line),
  or success (with the backends agreeing) is fine; anything else is a finding.

A case is described by picklable data (opcode, keyword, value, mode); callables among the
bad values are ``Fn`` markers the worker turns into functions.
"""
import os
import pickle
import random
import select
import struct
import subprocess
import sys
import time

import numpy as np

F32, I32 = np.float32, np.int32
PROJECT_ERRORS = ("ShapeError", "HloParseError", "ExecutionError", "SizeLimitError", "NotImplementedError",
                  "CallError")
HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.environ.get("XLA_EXPLORER_CORPUS", os.path.join(HERE, "..", "..", "shared", "hlo_corpus"))


# =====================================================================================
# Legal example calls

class Fn:
    """A callable, described by data (picklable): made in the worker by ``make_fn``."""

    def __init__(self, kind):
        self.kind = kind

    def __repr__(self):
        return f"Fn({self.kind!r})"

    def __eq__(self, other):
        return isinstance(other, Fn) and other.kind == self.kind

    def __hash__(self):
        return hash(self.kind)


def make_fn(kind):
    import xla_explorer as xe
    table = {
        "add": lambda a, b: xe.Add(a, b),
        "max": lambda a, b: xe.Max(a, b),
        "ge": lambda a, b: xe.Ge(a, b),
        "lt": lambda a, b: xe.Lt(a, b),
        "second": lambda a, b: b,
        "scan_sum": lambda x, c: (xe.Add(x, c), xe.Add(x, c)),
        "neg": lambda a: xe.Neg(a),
        "cond_lt3": lambda s: xe.Lt(xe.GetTupleElement(s, 0), xe.Constant(s.builder, I32(3))),
        "body_inc": lambda s: xe.Tuple(xe.Add(xe.GetTupleElement(s, 0), xe.Constant(s.builder, I32(1))),
                                       xe.GetTupleElement(s, 1)),
        # illegal ones
        "arity0": lambda: None,
        "arity1": lambda a: a,
        "arity3": lambda a, b, c: a,
        "varargs": lambda *a: a[0],
        "returns_none": lambda *a: None,
        "returns_str": lambda *a: "abc",
        "returns_array": lambda *a: np.ones(3, F32),
        "returns_wrong_type": lambda *a: xe.ConvertElementType(a[0], "s32") if a else None,
        "returns_tuple": lambda *a: (a[0], a[0]) if a else None,
        "raises": lambda *a: 1 / 0,
        "type_error": lambda *a: a[0] + "x",
        "other_builder": lambda *a: xe.Parameter(xe.XlaBuilder("elsewhere"), 0, "f32[]"),
        "keyword_only": lambda *, a, b: a,
        "recursion": _recursive,
    }
    return table[kind]


def _recursive(*a):
    return _recursive(*a)


def _x():
    return (np.arange(6, dtype=F32).reshape(2, 3) + 1) / 4


def _f(v):
    """Fn markers inside args/kwargs made into functions (recursively)."""
    if isinstance(v, Fn):
        return make_fn(v.kind)
    if isinstance(v, list):
        return [_f(x) for x in v]
    if isinstance(v, tuple):
        return tuple(_f(x) for x in v)
    if isinstance(v, dict):
        return {k: _f(x) for k, x in v.items()}
    return v


class Example:
    """``api(*args, **kwargs)`` (the public function ``xe.<api>``); ``builder_args``: the
    positional arguments that are the builder (None when run eagerly)."""

    def __init__(self, opcode, api, args, kwargs=None):
        self.opcode, self.api, self.args, self.kwargs = opcode, api, list(args), dict(kwargs or {})

    def __repr__(self):
        return f"<Example {self.opcode}: {self.api}>"


def _handwritten():
    x, v3, s = _x(), np.array([1, 2, 3], F32), F32(0)
    idx = np.array([[1], [0]], I32)
    sq = np.array([[4, 2], [2, 3]], F32)
    bn = np.ones((2, 3), F32)
    return [
        Example("broadcast", "BroadcastInDim", [v3, [2, 3], [1]]),
        Example("broadcast", "Broadcast", [x, [2]]),
        Example("reshape", "Reshape", [x, [3, 2]]),
        Example("transpose", "Transpose", [x, [1, 0]]),
        Example("reverse", "Rev", [x, [0]]),
        Example("concatenate", "Concatenate", [x, x], {"dimension": 0}),
        Example("iota", "Iota", [None, "s32[4]", 0]),
        Example("copy", "Copy", [x]),
        Example("bitcast", "Bitcast", [x, "f32[3,2]"]),
        Example("dynamic-reshape", "DynamicReshape", [x, [I32(6)], [6], [True]]),
        Example("slice", "Slice", [x, [0, 1], [2, 3], [1, 1]]),
        Example("dynamic-slice", "DynamicSlice", [x, [I32(0), I32(1)], [2, 2]]),
        Example("dynamic-update-slice", "DynamicUpdateSlice", [x, np.ones((1, 2), F32), [I32(1), I32(0)]]),
        Example("pad", "Pad", [x, s, [(1, 0, 1), (0, 1, 0)]]),
        Example("gather", "Gather", [x, idx], dict(offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0],
                                                   index_vector_dim=1, slice_sizes=[1, 3])),
        Example("scatter", "Scatter", [x, idx, np.ones((2, 3), F32), Fn("add")],
                dict(update_window_dims=[1], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
                     index_vector_dim=1)),
        Example("reduce", "Reduce", [x, s, Fn("add"), [1]]),
        Example("reduce-window", "ReduceWindow", [x, s, Fn("add"), [1, 2], [1, 1], [(0, 0), (0, 1)]]),
        Example("select-and-scatter", "SelectAndScatter",
                [np.arange(8, dtype=F32).reshape(2, 4), Fn("ge"), [1, 2], [1, 2], "VALID",
                 np.ones((2, 2), F32), s, Fn("add")]),
        Example("sort", "Sort", [x], {"dimension": 1, "is_stable": True}),
        Example("topk", "TopK", [x, 2]),
        Example("dot", "DotGeneral", [x, x.T.copy()], dict(lhs_contracting_dimensions=[1],
                                                             rhs_contracting_dimensions=[0])),
        Example("dot", "Dot", [x, x.T.copy()]),
        Example("convolution", "ConvGeneralDilated",
                [np.ones((1, 1, 5), F32), np.ones((1, 1, 2), F32), [1], [(1, 0)]],
                dict(lhs_dilation=[1], rhs_dilation=[2], feature_group_count=1, batch_group_count=1)),
        Example("fft", "Fft", [np.ones(4, np.complex64), "FFT", [4]]),
        Example("cholesky", "Cholesky", [sq], {"lower": True}),
        Example("triangular-solve", "TriangularSolve", [np.tril(sq), np.ones((2, 2), F32)],
                dict(left_side=True, lower=True, unit_diagonal=False, transpose_a="NO_TRANSPOSE")),
        Example("batch-norm-training", "BatchNormTraining", [bn, v3, v3, 1e-3, 1]),
        Example("batch-norm-inference", "BatchNormInference", [bn, v3, v3, v3, v3, 1e-3, 1]),
        Example("batch-norm-grad", "BatchNormGrad", [bn, v3, v3, v3, bn, 1e-3, 1]),
        Example("tuple", "Tuple", [x, v3]),
        Example("get-tuple-element", "GetTupleElement", [(x, v3), 1]),
        Example("call", "Call", [Fn("neg"), v3]),
        Example("map", "Map", [[v3, v3], Fn("add"), [0]]),
        Example("while", "While", [Fn("cond_lt3"), Fn("body_inc"), (I32(0), v3)]),
        Example("conditional", "Conditional", [np.bool_(True), v3, Fn("neg"), v3, Fn("neg")]),
        Example("after-all", "AfterAll", [None]),
        Example("opt-barrier", "OptimizationBarrier", [x]),
        Example("get-dimension-size", "GetDimensionSize", [x, 1]),
        Example("set-dimension-size", "SetDimensionSize", [x, I32(2), 1]),
        Example("compare", "Compare", [x, x, "LT"], {"compare_type": "FLOAT"}),
        Example("select", "Select", [x > 0.5, x, x]),
        Example("clamp", "Clamp", [F32(0.5), x, F32(1)]),
        Example("convert", "ConvertElementType", [x, "s32"]),
        Example("bitcast-convert", "BitcastConvertType", [x, "s32"]),
        Example("reduce-precision", "ReducePrecision", [x, 5, 8]),
        Example("custom-call", "CustomCall", ["Sharding", [x], "f32[2,3]"]),
        Example("all-reduce", "AllReduce", [x, Fn("add")], {"replica_groups": [[0]]}),
        Example("all-gather", "AllGather", [x, 0], {"shard_count": 1}),
        Example("all-to-all", "AllToAll", [x, 0, 0, 1]),
        Example("reduce-scatter", "ReduceScatter", [x, Fn("add"), 0], {"shard_count": 1}),
        Example("collective-permute", "CollectivePermute", [x, [(0, 0)]]),
        Example("collective-broadcast", "CollectiveBroadcast", [x, [[0]]]),
        Example("replica-id", "ReplicaId", [None]),
        Example("partition-id", "PartitionId", [None]),
        Example("rng", "RngUniform", [F32(0), F32(1), "f32[3]"]),
        Example("rng-bit-generator", "RngBitGenerator", ["rng_default", np.array([1, 2], np.uint64), "u32[4]"]),
        Example("scan", "Scan", [np.array([1, 2, 3, 4], I32), I32(0), Fn("scan_sum")], {"dimension": 0}),
        Example("infeed", "Infeed", [None, "f32[2]"]),
        Example("outfeed", "Outfeed", [x]),
        Example("send", "Send", [x, 1]),
        Example("send-done", "Send", [x, 1]),
        Example("recv", "Recv", [None, "f32[2,3]", 1]),
        Example("recv-done", "Recv", [None, "f32[2,3]", 1]),
    ]


#: element-wise operands tried in order until the op accepts them
_ELEMENTWISE_TRIALS = [
    lambda: [_x()], lambda: [np.array([1, -2, 3], I32)], lambda: [np.array([True, False])],
    lambda: [np.array([1 + 2j, 3], np.complex64)],
]
_BINARY_TRIALS = [
    lambda: [_x(), _x() + 1], lambda: [np.array([5, -7, 3], I32), np.array([2, 3, 1], I32)],
    lambda: [np.array([True, False]), np.array([True, True])],
]


_EXAMPLES = None


def examples():
    """{opcode: [Example, ...]}: at least one legal call for every registered op that has a
    public function (the element-wise ones found by trying operand types).  Made once per
    process (the ops never modify their inputs: the fuzz tests check it too)."""
    global _EXAMPLES
    if _EXAMPLES is None:
        _EXAMPLES = _make_examples()
    return _EXAMPLES


def _make_examples():
    import xla_explorer as xe
    from xla_explorer.ops import registry
    out = {}
    for ex in _handwritten():
        out.setdefault(ex.opcode, []).append(ex)
    for opcode, op in sorted(registry.all_ops().items()):
        if opcode in out or not op.name or not hasattr(xe, op.name) or opcode in ("parameter", "constant"):
            continue
        trials = _BINARY_TRIALS if "binary" in op.categories else _ELEMENTWISE_TRIALS
        for make in trials:
            args = make()
            try:
                getattr(xe, op.name)(*args)
            except Exception:  # noqa: BLE001 - not this type: try the next
                continue
            out[opcode] = [Example(opcode, op.name, args)]
            break
    return out


def no_example(exs=None):
    """Registered ops (with a public function) that no example covers (the tests want none)."""
    import xla_explorer as xe
    from xla_explorer.ops import registry
    exs = examples() if exs is None else exs
    return sorted(o for o, op in registry.all_ops().items()
                  if o not in exs and o not in ("parameter", "constant") and hasattr(xe, op.name))


# =====================================================================================
# Illegal values from the schema

class Bad:
    """A value for an attribute: ``must_refuse`` when no op may accept it (a float for a
    dimension list); otherwise it may be legal, and then the backends must agree."""

    def __init__(self, value, must_refuse=True):
        self.value, self.must_refuse = value, must_refuse

    def __repr__(self):
        return f"Bad({self.value!r}{'' if self.must_refuse else ', maybe legal'})"


def _maybe(*values):
    return [Bad(v, False) for v in values]


def bad_values(kind, required=True):
    """Illegal (or edge) values for an attribute of schema kind ``kind``."""
    none = [Bad(None, required)]
    common = [Bad("abc"), Bad(b"01"), Bad({0: 1}), Bad(object.__name__ and {1, 2})]
    if kind == "ints":
        return none + common + [Bad([2.9]), Bad("01"), Bad(1.5), Bad([True]), Bad([np.float32(1)]), Bad([[0]]),
                                Bad([None]), Bad(np.array([0.5])), Bad([1, "1"]), Bad(Fn("add"))] + \
            _maybe([-1], [2 ** 63], [10 ** 30], [], [0, 0], [7], [0, 1, 2, 3], range(2), np.array([1], np.int64),
                   [np.int16(0)])
    if kind == "int":
        return none + common + [Bad(2.9), Bad("1"), Bad(True), Bad([1]), Bad(np.float64(1.0)), Bad(complex(1, 0)),
                                Bad(np.array([1, 2])), Bad(Fn("add"))] + \
            _maybe(-1, 2 ** 64, -2 ** 63 - 1, 10 ** 30, 0, 7, np.int8(1), np.array(1))
    if kind == "bool":
        return none + common + [Bad("False"), Bad("True"), Bad(0), Bad(1), Bad(2), Bad(0.0), Bad("yes"),
                                Bad(np.array([True, False])), Bad([True])] + _maybe(np.bool_(True), False)
    if kind == "float":
        return none + common + [Bad("1e-3"), Bad(True), Bad([1.0]), Bad(complex(1, 1))] + \
            _maybe(float("nan"), float("inf"), -1.0, 1e308, 0, np.float16(1))
    if kind in ("str", "qstr"):
        return none + [Bad(1), Bad(b"EQ"), Bad(["EQ"]), Bad(3.5)] + _maybe("BOGUS", "", "lt", "x" * 1000)
    if kind == "computation":
        return none + common + [Bad(1), Bad("add"), Bad(Fn("arity0")), Bad(Fn("arity1"), False), Bad(Fn("arity3")),
                                Bad(Fn("returns_none")), Bad(Fn("returns_str")), Bad(Fn("raises")),
                                Bad(Fn("type_error")), Bad(Fn("other_builder")), Bad(Fn("keyword_only")),
                                Bad(Fn("recursion")), Bad([Fn("add")])] + \
            _maybe(Fn("returns_array"), Fn("returns_wrong_type"), Fn("returns_tuple"), Fn("varargs"), Fn("second"))
    if kind == "computations":
        return none + [Bad([]), Bad([1]), Bad("abc"), Bad([Fn("arity0")]), Bad(Fn("arity1")),
                       Bad([Fn("returns_none"), Fn("raises")])] + _maybe([Fn("neg")], [Fn("neg"), Fn("neg")])
    if kind == "int_lists":
        return none + common + [Bad([[0, 1.5]]), Bad("01"), Bad([[True]]), Bad([0, 1])] + \
            _maybe([[-1]], [[0, 0]], [[5]], [], [[0], [1]], [[2 ** 63]])
    if kind == "pairs":
        return none + common + [Bad([(1.5, 0)]), Bad([(0,)]), Bad("bogus"), Bad([[True, 0]]), Bad([(0, "1")])] + \
            _maybe([(0, 0, 0)], [(-1, -1)], [(10 ** 9, 0)], "SAME", "VALID", [(0, 0)] * 5, [])
    if kind == "triples":
        return none + common + [Bad([(1.5, 0, 0)]), Bad([(0,)]), Bad("bogus"), Bad([[True, 0, 0]])] + \
            _maybe([(0, 0, -1)], [(-5, -5, 0)], [(10 ** 9, 0, 0)], [(0, 0, 0)] * 5, [(0, 0)] * 2)
    if kind == "bools":
        return none + common + [Bad([1]), Bad(["False"]), Bad("TT"), Bad([0.0])] + _maybe([True], [False] * 5)
    if kind == "shape":
        return none + [Bad(1), Bad(2.5), Bad([2, 3]), Bad("f32[2.5]"), Bad("q99[2]")] + \
            _maybe("f32[100000,100000,100000]", "s32[]", "f32[3,2]", "(f32[], s32[])")
    if kind == "raw":
        return _maybe("bogus", None, 1)
    return [Bad(None, required), Bad(1.5), Bad("bogus")]


def must_refuse(kind, value):
    """Whether no op may accept ``value`` for an attribute of ``kind`` (its type is wrong)."""
    from xla_explorer.coerce import is_int

    def int_list(v):
        if isinstance(v, np.ndarray):
            return v.ndim == 1 and v.dtype.kind in "iu"
        return isinstance(v, (list, tuple, range)) and all(is_int(x) for x in v)

    if kind == "ints":
        return not int_list(value)
    if kind == "int":
        return not is_int(value) and not (isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iu")
    if kind == "bool":
        return not isinstance(value, (bool, np.bool_))
    if kind == "float":
        return isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating))
    if kind in ("str", "qstr"):   # (an enum may also take a flag: TriangularSolve(transpose_a=True))
        return not isinstance(value, (str, bool))
    if kind == "int_lists":
        return not (isinstance(value, (list, tuple)) and all(int_list(g) for g in value))
    if kind in ("pairs", "triples"):
        return not (isinstance(value, str) or (isinstance(value, (list, tuple)) and all(int_list(g) for g in value)))
    if kind == "bools":
        return not (isinstance(value, (list, tuple)) and all(isinstance(x, (bool, np.bool_)) for x in value))
    return False


#: operand replacements (value, must_refuse): things that are not arrays (or odd ones)
BAD_OPERANDS = [(None, True), ("abc", True), ({1: 2}, True), ([1, "a"], True), (np.array(["a", "b"]), True),
                (Fn("add"), True), (2 ** 40, False), ("OTHER_BUILDER", True), (2 ** 70, False),
                (np.zeros((2, 2), np.float32), False), (np.float64(1.5), False), ([[1, 2], [3]], False),
                (np.array([1, 2], dtype=object), True), (1j, False), (True, False), (b"x", True),
                (np.zeros((0, 3), np.float32), False), (float("nan"), False)]


def case_kinds(opcode, index=0):
    """[(keyword, kind, required, in_schema)]: the op's schema attributes and its public
    function's other arguments; None is not an error where the function's default is None."""
    import inspect

    import xla_explorer as xe
    from xla_explorer.ops import registry
    ex = examples()[opcode][index]
    fn = getattr(xe, ex.api)
    defaults = {p.name: p.default for p in inspect.signature(getattr(fn, "__wrapped_op__", fn)).parameters.values()
                if p.default is not p.empty}
    schema = attribute_kinds(registry.OPS[opcode])
    names = {kw for kw, _, _ in schema}
    out = [(kw, kind, required and not (kw in defaults and defaults[kw] is None), True)
           for kw, kind, required in schema]
    out += [(kw, kind, required, False) for kw, kind, required in api_argument_kinds(ex) if kw not in names]
    return out


def attribute_kinds(op):
    """[(keyword, kind, required)] for every Python keyword of ``op``'s schema."""
    from xla_explorer.hlo.attrs import REQUIRED, Attr, PaddingConfig, SliceAttr, Window
    out = []
    for a in op.attrs:
        if isinstance(a, Attr):
            out.append((a.kw, a.kind, a.default is REQUIRED))
        elif isinstance(a, Window):
            for field, kw in a.fields.items():
                # a field left out (None) takes its default (1s, no padding): not required
                out.append((kw, "pairs" if field == "pad" else "bools" if field == "rhs_reversal" else "ints", False))
        elif isinstance(a, PaddingConfig):
            out.append((a.kw, "triples", True))
        elif isinstance(a, SliceAttr):
            out.extend((kw, "ints", kw != "strides") for kw in a.kws)
        else:   # the op's own codecs: one dimension, a shape, dimension numbers
            kw = a.kws[0]
            out.append((kw, "shape" if "shape" in kw else "raw" if kw == "dimension_numbers" else "int",
                        getattr(a, "default", REQUIRED) is REQUIRED))
    return out


def api_argument_kinds(example):
    """[(name, kind, required)] for the public function's arguments that are not operands
    (nor the builder), the kind read from the example's value (a bool flag, an int, a list
    of ints, a list of lists, text, a number)."""
    import inspect

    import xla_explorer as xe
    from xla_explorer.builder import _OPERAND_ARGS
    fn = getattr(xe, example.api)
    sig = inspect.signature(getattr(fn, "__wrapped_op__", fn))
    try:
        bound = sig.bind(*example.args, **example.kwargs)
    except TypeError:
        return []
    out = []
    for name, p in sig.parameters.items():
        if name in _OPERAND_ARGS or name == "builder" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        v = bound.arguments.get(name, p.default)
        if v is p.empty:
            continue
        if isinstance(v, bool):
            kind = "bool"
        elif isinstance(v, (int, np.integer)):
            kind = "int"
        elif isinstance(v, float):
            kind = "float"
        elif isinstance(v, str):
            kind = "shape" if "[" in v else "str"
        elif isinstance(v, (list, tuple)) and v and all(isinstance(x, (list, tuple)) and len(x) == 2 and
                                                         all(isinstance(y, int) for y in x) for x in v) and \
                name in ("padding",):
            kind = "pairs"
        elif isinstance(v, (list, tuple)) and v and all(isinstance(x, (list, tuple)) for x in v):
            kind = "int_lists" if all(isinstance(y, int) for x in v for y in x) else "raw"
        elif isinstance(v, (list, tuple)) and all(isinstance(x, (int, np.integer)) and not isinstance(x, bool)
                                                  for x in v):
            kind = "ints"
        else:
            kind = "raw"
        out.append((name, kind, p.default is p.empty or p.default is not None))
    return out


# =====================================================================================
# Running a case (in the worker)

class CaseTimeout(BaseException):
    """Raised in the worker when a case runs longer than CASE_SECONDS (as SIGINT would)."""


#: a case still running after this long is interrupted (a never-ending While is legal);
#: the probe raises it on a loaded machine (FUZZ_CASE_SECONDS), where a Numba compile alone
#: can take longer and would be counted as a hang
CASE_SECONDS = float(os.environ.get("FUZZ_CASE_SECONDS", 20))


def _describe_error(e):
    if isinstance(e, CaseTimeout):
        return {"kind": "interrupted"}
    return {"kind": "error", "type": type(e).__name__, "message": str(e)[:2000],
            "project": type(e).__name__ in PROJECT_ERRORS or _is_project(e)}


def _is_project(e):
    import xla_explorer as xe
    return isinstance(e, (xe.ShapeError, xe.HloParseError, xe.ExecutionError, NotImplementedError))


def _call_api(example, args, kwargs):
    import xla_explorer as xe
    return getattr(xe, example.api)(*_f(args), **_f(kwargs))


def _symbolic(example, args, kwargs):
    """Build ``example`` in a builder: every operand array (by the public function's argument
    names) becomes a parameter; returns (computation, parameter values)."""
    import inspect

    import xla_explorer as xe
    from xla_explorer.builder import _OPERAND_ARGS
    fn = getattr(xe, example.api)
    sig = inspect.signature(getattr(fn, "__wrapped_op__", fn))
    b = xe.XlaBuilder(f"fuzz_{example.opcode}")
    values = []

    def param(v):
        if isinstance(v, (np.ndarray, np.generic)) and np.asarray(v).dtype.kind in "biufc":
            values.append(np.asarray(v))
            return xe.Parameter(b, len(values) - 1, xe.Shape.of(np.asarray(v)), f"p{len(values) - 1}")
        if isinstance(v, tuple) and v and all(isinstance(x, (np.ndarray, np.generic)) for x in v):
            values.append(tuple(np.asarray(x) for x in v))
            return xe.Parameter(b, len(values) - 1, xe.Shape.of(values[-1]), f"p{len(values) - 1}")
        return v

    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError:
        bound = None
    new_args, new_kwargs = list(args), dict(kwargs)
    if bound is not None:
        for name, v in bound.arguments.items():
            p = sig.parameters[name]
            if name == "builder":
                v = b
            elif name in _OPERAND_ARGS:
                if p.kind == p.VAR_POSITIONAL:
                    v = tuple(param(x) for x in v)
                elif isinstance(v, list):
                    v = [param(x) for x in v]
                else:
                    v = param(v)
            bound.arguments[name] = v
        new_args, new_kwargs = list(bound.args), dict(bound.kwargs)
    result = fn(*_f(new_args), **_f(new_kwargs))
    return b.build(result), values


def _same(a, b):
    if isinstance(a, tuple) or isinstance(b, tuple):
        return isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) and \
            all(_same(x, y) for x, y in zip(a, b))
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind in "fc":
        a64, b64 = a.astype(np.complex128), b.astype(np.complex128)
        close = np.isclose(a64, b64, rtol=1e-3, atol=1e-5, equal_nan=True)
        return bool(np.all(close))
    if a.dtype.kind == "V" or a.dtype == object:
        return True
    return bool(np.array_equal(a, b))


def run_op_case(opcode, index, mode, kw, value, backends=("numpy",)):
    """One op call with attribute ``kw`` set to ``value`` (no change when kw is None).

    ``mode``: "eager" (NumPy values), "symbolic" (a builder, then run on ``backends``,
    compared with one another), or "apply" (``apply_op`` with the instruction's attributes,
    the schema's keyword set directly).  Returns an outcome dict."""
    import xla_explorer as xe
    from xla_explorer.builder import apply_op
    ex = examples()[opcode][index]
    args, kwargs = list(ex.args), dict(ex.kwargs)
    try:
        if kw is not None and mode != "apply":
            import inspect
            fn = getattr(xe, ex.api)
            sig = inspect.signature(getattr(fn, "__wrapped_op__", fn))
            params = list(sig.parameters)
            if kw in params and params.index(kw) < len(args) and \
                    sig.parameters[kw].kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,):
                args[params.index(kw)] = value
            else:
                kwargs[kw] = value
        if mode == "eager":
            out = _call_api(ex, args, kwargs)
            return {"kind": "ok", "agree": True}
        comp, values = _symbolic(ex, ex.args if mode == "apply" else args, ex.kwargs if mode == "apply" else kwargs)
        if mode == "apply":
            inst = comp.entry.root
            while inst.opcode != opcode and inst.operands:   # composite functions: the op is inside
                inst = next((o for o in inst.operands if o.opcode == opcode), inst.operands[0])
            if inst.opcode != opcode:
                return {"kind": "skip"}
            attrs = dict(inst.attrs)
            attrs[kw] = _f(value)
            operands = [np.zeros(o.shape.dims, o.shape.dtype) if o.shape.is_array else None for o in inst.operands]
            if any(o is None for o in operands):
                return {"kind": "skip"}
            b = xe.XlaBuilder("apply")
            params = [xe.Parameter(b, i, o.shape, f"p{i}") for i, o in enumerate(inst.operands)]
            comp = b.build(apply_op(opcode, params, attrs, builder=b))
            values = operands
        results = {}
        for backend in backends:
            try:
                results[backend] = comp.run(*values, backend=backend)
            except Exception as e:  # noqa: BLE001 - judged by the parent
                results[backend] = e
        errors = {k: v for k, v in results.items() if isinstance(v, BaseException)}
        if errors:
            first = next(iter(errors.values()))
            out = _describe_error(first)
            out["backends"] = {k: (type(v).__name__ if isinstance(v, BaseException) else "ok")
                               for k, v in results.items()}
            out["agree"] = len(errors) == len(results) and len({type(v).__name__ for v in errors.values()}) == 1
            return out
        values_list = list(results.values())
        return {"kind": "ok", "agree": all(_same(values_list[0], v) for v in values_list[1:])}
    except BaseException as e:  # noqa: B902 - every outcome is reported
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        return _describe_error(e)


def _run_on(comp, args, backends):
    """Each backend's result of ``comp`` on ``args``, or what it raised (a case time-out
    included: the caller reports it); only Ctrl-C and exit pass through."""
    results = {}
    for backend in backends:
        try:
            results[backend] = comp.run(*args, backend=backend)
        except BaseException as e:  # noqa: B902
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            results[backend] = e
    return results


def run_hlo_case(text, backends=("numpy", "numba"), seed=0):
    """Parse ``text``; if it parses, run it on ``backends`` with small random arguments."""
    import xla_explorer as xe
    try:
        comp = xe.parse_hlo(text)
    except BaseException as e:  # noqa: B902
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        out = _describe_error(e)
        out["stage"] = "parse"
        out["line"] = getattr(e, "line", None)
        return out
    rng = np.random.default_rng(seed)
    try:
        args = [random_value(p.shape, rng) for p in comp.entry.parameters]
    except ValueError as e:
        return {"kind": "skip", "why": str(e)}
    results = _run_on(comp, args, backends)
    errors = {k: v for k, v in results.items() if isinstance(v, BaseException)}
    names = {i.name for c in comp.computations for i in c.instructions}
    if any(isinstance(v, CaseTimeout) for v in errors.values()):
        return {"kind": "interrupted", "has_while": any(i.opcode == "while" for c in comp.computations
                                                          for i in c.instructions)}
    if errors:
        first = next(iter(errors.values()))
        out = _describe_error(first)
        out["stage"] = "run"
        out["names_instruction"] = any(n in out["message"] for n in names) or "line " in out["message"] or \
            f"module {comp.name}" in out["message"]
        out["agree"] = len(errors) == len(results) and len({type(v).__name__ for v in errors.values()}) == 1
        out["backends"] = {k: (type(v).__name__ if isinstance(v, BaseException) else "ok") for k, v in results.items()}
        return out
    values = list(results.values())
    return {"kind": "ok", "agree": all(_same(values[0], v) for v in values[1:])}


def random_value(shape, rng, max_bytes=1 << 22):
    """Small random arguments for a parameter (ValueError when the shape is too big)."""
    if shape.is_tuple:
        return tuple(random_value(s, rng, max_bytes) for s in shape.tuple_shapes)
    if shape.is_token:
        return None
    if not shape.is_static or shape.nbytes > max_bytes:
        raise ValueError(f"no argument made for {shape}")
    t = shape.element_type
    if t == "pred":
        return rng.random(shape.dims) < 0.5
    if shape.dtype.kind in "iu":
        return rng.integers(0, 4, shape.dims).astype(shape.dtype)
    if shape.dtype.kind == "c":
        return (rng.standard_normal(shape.dims) + 1j * rng.standard_normal(shape.dims)).astype(shape.dtype)
    return rng.standard_normal(shape.dims).astype(shape.dtype)


def run_args_case(text, args, backends=("numpy", "numba")):
    """Run a parsed module on the given (possibly bad) arguments on each backend."""
    import xla_explorer as xe
    comp = xe.parse_hlo(text)
    originals = [np.array(a, copy=True) if isinstance(a, np.ndarray) else None for a in args]
    results = _run_on(comp, args, backends)
    modified = any(o is not None and not np.array_equal(o, a, equal_nan=True)
                   for o, a in zip(originals, args))
    errors = {k: v for k, v in results.items() if isinstance(v, BaseException)}
    if any(isinstance(v, CaseTimeout) for v in errors.values()):
        # over the case's time limit (Numba compiling on a loaded machine): the worker then
        # starts afresh -- a compile cut short leaves half-made kernels behind in its process
        return {"kind": "interrupted", "modified": modified}
    if errors:
        first = next(iter(errors.values()))
        out = _describe_error(first)
        out["agree"] = len(errors) == len(results) and len({type(v).__name__ for v in errors.values()}) == 1
        out["modified"] = modified
        return out
    values = list(results.values())
    return {"kind": "ok", "agree": all(_same(values[0], v) for v in values[1:]), "modified": modified}


# =====================================================================================
# HLO text mutations

_NUMBER_EDITS = ["0", "1", "-1", "2", "3", "7", "100000000", "9223372036854775807", "99999999999999999999", "2.5",
                 "-0"]
_TOKEN_EDITS = ["f32", "s32", "pred", "u8", "f16", "bf16", "c64", "token", "(", ")", "{", "}", "[", "]", ",", "=",
                "ROOT", "%", "add", "tuple", "direction=BOGUS", "dimensions={}", "/*", "\"", "?", "<=3", "x" * 50]


def mutations(text, rng, count=1):
    """``text`` with ``count`` random hand-edits: numbers changed, tokens inserted, deleted
    or swapped, lines duplicated, deleted or swapped, names exchanged."""
    import re
    for _ in range(count):
        lines = text.split("\n")
        kind = rng.randrange(9)
        if kind == 0:   # change a number
            spans = [m.span() for m in re.finditer(r"-?\d+(\.\d+)?", text)]
            if spans:
                a, b = rng.choice(spans)
                text = text[:a] + rng.choice(_NUMBER_EDITS) + text[b:]
        elif kind == 1:   # insert a token
            pos = rng.randrange(len(text) + 1)
            text = text[:pos] + rng.choice(_TOKEN_EDITS) + text[pos:]
        elif kind == 2:   # delete a span
            a = rng.randrange(len(text) + 1)
            text = text[:a] + text[a + rng.randrange(1, 12):]
        elif kind == 3 and len(lines) > 2:   # duplicate a line
            k = rng.randrange(len(lines))
            lines.insert(k, lines[k])
            text = "\n".join(lines)
        elif kind == 4 and len(lines) > 2:   # delete a line
            del lines[rng.randrange(len(lines))]
            text = "\n".join(lines)
        elif kind == 5 and len(lines) > 3:   # swap two lines
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
            text = "\n".join(lines)
        elif kind == 6:   # exchange two instruction names in operand lists
            names = re.findall(r"%?([A-Za-z_][\w.\-]*) = ", text)
            if len(names) >= 2:
                a, b = rng.sample(names, 2)
                text = re.sub(rf"(?<=[(, ]){re.escape(a)}(?=[,)])", b, text, count=1)
        elif kind == 7:   # change a shape's element type or dimensions
            spans = [m.span() for m in re.finditer(r"\b(f32|s32|pred|f64|bf16|u32|s64|u8)\[[\d,]*\]", text)]
            if spans:
                a, b = rng.choice(spans)
                text = text[:a] + rng.choice(["f32[]", "s32[3]", "f32[2,3]", "pred[4]", "f32[100000000]",
                                              "f32[3,3,3,3,3,3,3,3,3,3]", "u8[0]", "f32[1]"]) + text[b:]
        else:   # change an opcode
            ops = [m.span(1) for m in re.finditer(r"\] ([a-z][a-z\-]*)\(", text)]
            if ops:
                a, b = rng.choice(ops)
                text = text[:a] + rng.choice(["add", "multiply", "negate", "tuple", "copy", "transpose", "reduce",
                                              "gather", "bogus-op", "while", "sort", "convert", "abs"]) + text[b:]
    return text


def corpus_texts():
    """{case name: module text} of the HLO corpus (empty when it is not there)."""
    out = {}
    if not os.path.isdir(CORPUS):
        return out
    for name in sorted(os.listdir(CORPUS)):
        path = os.path.join(CORPUS, name, "module.hlo")
        if os.path.exists(path):
            with open(path) as f:
                out[name] = f.read()
    return out


# =====================================================================================
# Verdicts

def names_op(message, opcode, api=None):
    from xla_explorer.ops import registry
    op = registry.OPS.get(opcode)
    candidates = {opcode, api, op.name if op else None}
    low = message.lower()
    return any(c and (c in message or c.lower().replace("-", "") in low.replace("-", "")) for c in candidates)


def classify_op(outcome, opcode, api, bad):
    """'fine', or the finding: 'crash', 'hang', 'memory', 'bare', 'unnamed', 'accepted',
    'disagree' (an outcome dict from ``run_op_case`` through the worker)."""
    kind = outcome["kind"]
    if kind in ("crash", "hang", "memory"):
        return kind
    if kind == "interrupted":   # stopped cleanly after CASE_SECONDS: an endless While is legal
        return "fine" if opcode == "while" else "hang"
    if kind == "skip":
        return "fine"
    if kind == "error":
        if outcome["type"] == "MemoryError":
            return "memory"
        if not outcome["project"]:
            return "bare"
        if not names_op(outcome["message"], opcode, api):
            return "unnamed"
        if not outcome.get("agree", True):
            return "disagree"
        return "fine"
    if bad is not None and bad.must_refuse:
        return "accepted"
    return "fine" if outcome.get("agree", True) else "disagree"


def classify_hlo(outcome):
    kind = outcome["kind"]
    if kind in ("crash", "hang", "memory"):
        return kind
    if kind == "interrupted":
        return "fine" if outcome.get("has_while") else "hang"
    if kind == "skip":
        return "fine"
    if kind == "error":
        if outcome["type"] == "MemoryError":
            return "memory"
        if not outcome["project"]:
            return "bare"
        if outcome.get("stage") == "parse":
            return "fine" if outcome["type"] == "HloParseError" and outcome.get("line") is not None else "unnamed"
        if not outcome.get("names_instruction", True):
            return "unnamed"
        return "fine" if outcome.get("agree", True) else "disagree"
    return "fine" if outcome.get("agree", True) else "disagree"


# =====================================================================================
# The worker: a process that runs cases; a crash is observed, not fatal

#: a case whose peak memory grows more than this is a memory blow-up
MEMORY_BLOWUP = 3 << 30


class Worker:
    """``Worker().call("run_op_case", ...)`` runs a function of this module in a child
    process and returns its outcome, or {"kind": "crash"|"hang"} when the child died or
    did not answer within ``timeout`` seconds (then a fresh child is started)."""

    def __init__(self, timeout=120):
        self.timeout = timeout
        self.proc = None
        self.crashes = 0

    def _start(self):
        env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONFAULTHANDLER="0")
        self.proc = subprocess.Popen([sys.executable, "-u", os.path.abspath(__file__), "--worker"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=env, cwd=HERE)

    def call(self, fn, *args, timeout=None):
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        data = pickle.dumps((fn, args))
        try:
            self.proc.stdin.write(struct.pack("<Q", len(data)) + data)
            self.proc.stdin.flush()
            reply = self._read(timeout or self.timeout)
        except (BrokenPipeError, OSError, EOFError):
            return self._failed(ended=True)
        result = pickle.loads(reply)
        if result.get("kind") == "interrupted":
            # the interrupt may have landed inside a Numba compilation, which Numba does not
            # survive (the kernel stays half-made: "no compiled object yet"): a fresh process
            self.close()
        return result

    def _read(self, timeout):
        deadline = time.monotonic() + timeout
        buf = b""
        need = 8
        header = True
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([self.proc.stdout], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.proc.stdout.fileno(), need - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
            if len(buf) == need:
                if header:
                    need, header, buf = struct.unpack("<Q", buf)[0], False, b""
                    if need == 0:
                        return b""
                else:
                    return buf

    def _failed(self, ended=False):
        if ended:   # the pipe closed: the process is dying, collect its status
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                pass
        rc = self.proc.poll()
        if rc is None:   # no answer in time: a hang
            self.proc.kill()
            self.proc.wait()
            self.proc = None
            return {"kind": "hang"}
        self.proc = None
        self.crashes += 1
        return {"kind": "crash", "returncode": rc}

    def call_safe(self, fn, *args, timeout=None):
        try:
            return self.call(fn, *args, timeout=timeout)
        except TimeoutError:
            return self._failed()

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


def _worker_main():
    import resource
    import signal

    fired = []

    def interrupt(signum, frame):
        fired.append(True)
        raise CaseTimeout()

    signal.signal(signal.SIGALRM, interrupt)
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr   # prints of the code under test must not corrupt the protocol
    while True:
        header = inp.read(8)
        if len(header) < 8:
            return
        fn, args = pickle.loads(inp.read(struct.unpack("<Q", header)[0]))
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        fired.clear()
        signal.setitimer(signal.ITIMER_REAL, CASE_SECONDS)
        try:
            result = globals()[fn](*args)
        except MemoryError:
            result = {"kind": "memory"}
        except CaseTimeout:
            result = {"kind": "interrupted"}
        except KeyboardInterrupt:
            # the time-out landed inside LLVM's callback, where Python drops it: the
            # executor raises the interrupt it lost (any other Ctrl-C ends the worker)
            if not fired:
                raise
            result = {"kind": "interrupted"}
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        if after - before > MEMORY_BLOWUP:
            result = {"kind": "memory", "grew": after - before}
        data = pickle.dumps(result)
        out.write(struct.pack("<Q", len(data)) + data)
        out.flush()


# -- widgets and exercises (the probe's last two rows) -------------------------------------------

#: values typed into BuilderWidget's run box for a parameter (its inputs' text)
BAD_INPUT_TEXTS = ["", "[", "[[1.5], [7]]", "None", "abc", "1e999", "[" * 20000, "9" * 5000, "random(10**12)",
                   "zeros(10**12)", "[[2**70], [0]]", "__import__('os').getcwd()", "[[1], [2], [3]]", "nan",
                   "random(-1)", "lambda: 1", "[[True], [False]]", "[[1, 2]]", "{'a': 1}", "(" * 3000]


def widget_cases():
    """(op name, operands, arguments text): every op of BuilderWidget's list with each of its
    schema's attributes set to illegal values (as the student would type them), operands
    that do not exist or of the wrong type, and the run box's inputs ("input", text)."""
    from xla_explorer.ops import registry
    from xla_explorer.widgets import _text   # noqa: F401 - fails early without ipywidgets
    import xla_explorer as xe
    cases = []
    for opcode, op in sorted(registry.OPS.items()):
        if not op.name or not hasattr(xe, op.name):
            continue
        for kw, kind, _required in attribute_kinds(op):
            for bad in bad_values(kind)[:8]:
                text = f"{kw}={bad.value!r}"
                cases.append((op.name, ["x", "x"], text))
        for operands in (["nope"], ["x", "i", "x", "i"], ["1e999"], ["i"]):
            cases.append((op.name, operands, ""))
    cases += [("Parameter", [], f"parameter_number={n}, shape={sh!r}") for n in (-1, 2, 2 ** 63, "2", 2.5)
              for sh in ("f32[2]", "f32[100000,100000,100000]", "f32[", "(f32[], s32[])")]
    cases += [("input", [], t) for t in BAD_INPUT_TEXTS]
    return cases


def _widget():
    from xla_explorer.widgets import BuilderWidget
    bw = BuilderWidget("probe")
    bw.add_parameter("f32[3,4]", "x")
    bw.add_parameter("s32[2,1]", "i")
    return bw


#: a widget's error longer than this quotes what was typed whole (5,000 digits came back)
LONGEST_MESSAGE = 1000


def run_widget_case(name, operands, text):
    """One student action on a BuilderWidget: no exception may escape, a refusal leaves the
    builder as it was with an error beside a control, and the widget stays usable (a Neg
    then adds and runs)."""
    import numpy as np
    try:
        bw = _widget()
        before = (len(bw.builder.instructions), dict(bw.builder.parameters), bw.hlo)
        if name == "input":
            bw.op_name, bw.operands, bw.attrs_text = "Neg", ["x"], ""
            bw.add()
            bw.inputs["x"].value = text
            bw._run_button.click()
            outcome = {"kind": "ok" if not bw.run_error else "refused", "message": bw.run_error,
                       "ran": bool(bw.run_text)}
        else:
            try:
                bw.op_name = name
            except Exception as e:  # noqa: BLE001 - a TraitError for an op it does not list is its answer
                return {"kind": "refused", "message": f"{name}: {e}"}
            bw.operands, bw.attrs_text = list(operands), text
            result = bw.add()
            if result is None:
                if not bw.error:
                    return {"kind": "bare", "message": "refused without an error"}
                if (len(bw.builder.instructions), dict(bw.builder.parameters), bw.hlo) != before:
                    return {"kind": "accepted", "message": "a refused op changed the builder"}
                outcome = {"kind": "refused", "message": bw.error}
            else:
                outcome = {"kind": "ok", "message": ""}
                bw.undo()
        if len(outcome["message"]) > LONGEST_MESSAGE:   # shown beside the control: it quotes the input whole
            return {"kind": "unnamed", "message": f"a message of {len(outcome['message']):,} characters: "
                                                  f"{outcome['message'][:300]}"}
        bw.op_name, bw.operands, bw.attrs_text = "Neg", ["x"], ""
        if bw.add() is None:
            return {"kind": "broken", "message": f"Neg refused afterwards: {bw.error}"}
        bw.inputs["x"].value = "ones"
        bw._run_button.click()
        if bw.run_error or "-1." not in bw.run_text:
            return {"kind": "broken", "message": f"run afterwards: {bw.run_error or bw.run_text}"}
        return outcome
    except CaseTimeout:
        raise
    except RecursionError as e:
        return {"kind": "bare", "type": "RecursionError", "message": str(e)[:300]}
    except Exception as e:  # noqa: BLE001 - what escaped the widget
        return {"kind": "bare", "type": type(e).__name__, "message": str(e)[:300]}
    finally:
        np.seterr(all="warn")


def classify_widget(outcome):
    kind = outcome.get("kind")
    if kind in ("ok", "refused"):
        return "fine"
    return {"broken": "accepted", "interrupted": "hang"}.get(kind, kind)


def check_cases():
    """(op, kind, answer index): every exercise kind with every adversarial answer of
    tests/test_exercise_answers.py (malformed, huge, deep, endless, hostile)."""
    from test_exercise_answers import adversarial_answers
    from xla_explorer import exercises as E
    n = len(adversarial_answers())
    return [(op, kind, k) for op, kinds in sorted(E.available().items()) for kind in kinds for k in range(n)]


def run_check_case(op, kind, k):
    """``check`` of one exercise with one adversarial answer: a Feedback, never an exception,
    within 2 s of CPU."""
    import time as _time
    from test_exercise_answers import adversarial_answers
    from xla_explorer import exercises as E
    try:
        ex = E.make(op, seed=1, level=2, kind=kind)
        answer = adversarial_answers()[k]
        t0 = _time.process_time()
        fb = ex.check(answer)
        took = _time.process_time() - t0
    except CaseTimeout:
        raise
    except Exception as e:  # noqa: BLE001 - check must never raise
        return {"kind": "bare", "type": type(e).__name__, "message": str(e)[:300]}
    if not isinstance(fb, E.Feedback) or not isinstance(fb.message, str) or not fb.message:
        return {"kind": "bare", "message": f"not a Feedback: {fb!r}"[:300]}
    if took > 2.0:
        return {"kind": "hang", "message": f"{took:.1f} s"}
    if fb.correct and not ex.check(answer, teacher=True).correct:
        return {"kind": "accepted", "message": "judged right, then wrong"}
    return {"kind": "ok", "correct": bool(fb.correct)}


def classify_check(outcome):
    kind = outcome.get("kind")
    return "fine" if kind == "ok" else {"interrupted": "hang"}.get(kind, kind)


# -- dynamic dimensions -----------------------------------------------------------------------------

_DYNAMIC_BODIES = {   # (result shape from the bound B, body lines), operands x: f32[<=B], y: f32[<=B]
    "add": ("f32[<=B]", "ROOT r = f32[<=B] add(x, y)"),
    "chain": ("f32[<=B]", "a = f32[<=B] multiply(x, y)\n  n = f32[<=B] negate(a)\n  ROOT r = f32[<=B] add(n, x)"),
    "static-claim": ("f32[S]", "ROOT r = f32[S] add(x, y)"),
    "reduce": ("f32[]", "a = f32[<=B] add(x, y)\n  c = f32[] constant(0)\n"
                        "  ROOT r = f32[] reduce(a, c), dimensions={0}, to_apply=sum"),
    "concat": ("f32[<=C]", "ROOT r = f32[<=C] concatenate(x, y), dimensions={0}"),
    "slice": ("f32[2]", "ROOT r = f32[2] slice(x), slice={[0:2]}"),
}


def dynamic_module(kind, bound, static):
    """A module over two ``f32[<=bound]`` parameters (``static``: the size a static claim
    makes), as a hand-written dynamic-shape program would be."""
    _, body = _DYNAMIC_BODIES[kind]
    body = body.replace("<=B", f"<={bound}").replace("<=C", f"<={2 * bound}").replace("[S]", f"[{static}]")
    return ("HloModule dyn\n\nsum {\n  p = f32[] parameter(0)\n  q = f32[] parameter(1)\n"
            "  ROOT s = f32[] add(p, q)\n}\n\n"
            f"ENTRY e {{\n  x = f32[<={bound}] parameter(0)\n  y = f32[<={bound}] parameter(1)\n  {body}\n}}")


def run_dynamic_case(kind, bound, static, n, m, backends=("numpy", "numba")):
    """Parse, verify and run a dynamic module on values of sizes n and m: a project error
    naming the instruction (or line), or results agreeing with what the sizes give."""
    import xla_explorer as xe
    try:
        comp = xe.parse_hlo(dynamic_module(kind, bound, static))
        comp.verify()
    except Exception as e:  # noqa: BLE001 - described below
        out = _describe_error(e)
        out["stage"] = "verify"
        return out
    x, y = np.arange(n, dtype=np.float32) + 1, np.arange(m, dtype=np.float32) * 2
    out = run_args_case(comp.as_hlo_text(), [x, y], backends)
    if out["kind"] == "ok":
        legal = n <= bound and m <= bound and (kind in ("concat", "slice") or n == m) and (
            kind != "slice" or n >= 2) and (kind != "static-claim" or n == static)
        out["expected_error"] = not legal
    return out


def classify_dynamic(outcome):
    kind = outcome["kind"]
    if kind in ("crash", "hang", "memory", "interrupted"):
        return {"interrupted": "hang"}.get(kind, kind)
    if outcome.get("modified"):
        return "modified"
    if kind == "error":
        if not outcome["project"]:
            return "bare"
        if outcome.get("stage") != "verify" and not any(w in outcome["message"] for w in (" r ", "line", "argument")):
            return "unnamed"
        return "fine" if outcome.get("agree", True) else "disagree"
    if outcome.get("expected_error"):
        return "accepted"
    return "fine" if outcome.get("agree", True) else "disagree"


def shuffled(items, seed):
    items = list(items)
    random.Random(seed).shuffle(items)
    return items


# =====================================================================================
# More cases: operands, the builder's own API, run arguments, huge modules

def run_operand_case(opcode, index, mode, pos, value, backends=("numpy",)):
    """The example with its ``pos``-th argument replaced by ``value`` ("OTHER_BUILDER": an
    op of another builder of the same shape)."""
    import xla_explorer as xe
    ex = examples()[opcode][index]
    args = list(ex.args)
    try:
        if isinstance(value, str) and value == "OTHER_BUILDER":
            original = args[pos]
            if mode == "eager" or not isinstance(original, np.ndarray):
                return {"kind": "skip"}
            foreign = xe.Parameter(xe.XlaBuilder("other"), 0, xe.Shape.of(original), "other")
            _symbolic_with(ex, args, ex.kwargs, pos, foreign)
            return {"kind": "ok", "agree": True}
        args[pos] = value
        if mode == "eager":
            _call_api(ex, args, ex.kwargs)
            return {"kind": "ok", "agree": True}
        comp, values = _symbolic(ex, args, ex.kwargs)
        results = [comp.run(*values, backend=b) for b in backends]
        return {"kind": "ok", "agree": all(_same(results[0], r) for r in results[1:])}
    except BaseException as e:  # noqa: B902
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        return _describe_error(e)


def _symbolic_with(ex, args, kwargs, keep, foreign):
    """Like ``_symbolic`` but argument ``keep`` is ``foreign`` (an op of another builder)."""
    import inspect

    import xla_explorer as xe
    from xla_explorer.builder import _OPERAND_ARGS
    fn = getattr(xe, ex.api)
    sig = inspect.signature(getattr(fn, "__wrapped_op__", fn))
    b = xe.XlaBuilder("fuzz_mixed")
    bound = sig.bind(*args, **kwargs)
    for k, (name, v) in enumerate(list(bound.arguments.items())):
        if name == "builder":
            bound.arguments[name] = b
        elif name in _OPERAND_ARGS and isinstance(v, np.ndarray):
            bound.arguments[name] = xe.Parameter(b, k, xe.Shape.of(v), f"p{k}")
    new_args = list(bound.args)
    new_args[keep] = foreign
    result = fn(*_f(new_args), **_f(dict(bound.kwargs)))
    return b.build(result), None


def crash_for_test():
    """Kill the worker as a segmentation fault would (the harness's own test)."""
    import signal
    os.kill(os.getpid(), signal.SIGSEGV)


def is_operand(ex, pos):
    """Whether positional argument ``pos`` of the example holds operands (by its name)."""
    import inspect

    import xla_explorer as xe
    from xla_explorer.builder import _OPERAND_ARGS
    fn = getattr(xe, ex.api)
    params = list(inspect.signature(getattr(fn, "__wrapped_op__", fn)).parameters.values())
    if pos < len(params) and params[pos].kind != params[pos].VAR_POSITIONAL:
        return params[pos].name in _OPERAND_ARGS
    return any(p.kind == p.VAR_POSITIONAL and p.name in _OPERAND_ARGS for p in params)


def builder_api_cases():
    """(api, arguments, must_refuse) for the builder's own functions."""
    cases = []
    for number in (-1, 1.5, True, "0", None, 2 ** 70, np.float32(0)):
        cases.append(("Parameter", (number, "f32[2]"), True))
    for shape in (3, None, "f32[2.5]", "q32[2]", "f32[-1]", [2, 3], "f32[9223372036854775808]", "(" * 100 + "f32[]" + ")" * 100):
        cases.append(("Parameter", (0, shape), True))
    for value, et in ((None, None), ("abc", None), ({1: 2}, None), ([1, [2]], None), (np.array(["a"]), None),
                      (2 ** 40, None), (2.5, "s32"), (300, "u8"), (-1, "u32"), (1.5, "pred"), ([1, "a"], None),
                      (1, "q32"), (1, 3.5), (np.array([1, 2], dtype=object), None)):
        cases.append(("Constant", (value, et), True))
    for et, dims in (("f33", (2,)), ("f32", (2.5,)), ("f32", (-1,)), ("f32", (1 << 63,)), ("f32", ("x",)),
                     (None, (2,)), ("f32", (True,))):
        cases.append(("Shape", (et, dims), True))
    for text in ("f32[", "f32[2,]", "((f32[])", "f32[2]{0,1,2", "", "token[3]", "f32[<=x]", "f32[99999999999999999999]"):
        cases.append(("Shape.parse", (text,), True))
    for text in (None, b"HloModule m", 3, "", "HloModule", "ENTRY {", "}}}}", "HloModule m\nENTRY e {\n}",
                 "HloModule m\nENTRY e {\n  ROOT x = f32[] parameter(0)\n}\nENTRY f {\n  ROOT y = f32[] parameter(0)\n}"):
        cases.append(("parse_hlo", (text,), True))
    for root in ("x", 3, "OTHER_BUILDER", "EMPTY"):
        cases.append(("build", (root,), True))
    for backend in ("bogus", None, 3, ""):
        cases.append(("run", (backend,), True))
    return cases


def run_api_case(case):
    import xla_explorer as xe
    api, args, _ = case
    try:
        if api == "Parameter":
            b = xe.XlaBuilder("p")
            xe.Parameter(b, *args)
        elif api == "Constant":
            xe.Constant(xe.XlaBuilder("c"), *args)
        elif api == "Shape":
            xe.Shape(*args)
        elif api == "Shape.parse":
            xe.Shape.parse(*args)
        elif api == "parse_hlo":
            xe.parse_hlo(*args)
        elif api == "build":
            b = xe.XlaBuilder("build")
            root = args[0]
            if root == "EMPTY":
                b.build()
            else:
                xe.Parameter(b, 0, "f32[]")
                if root == "OTHER_BUILDER":
                    root = xe.Parameter(xe.XlaBuilder("other"), 0, "f32[]")
                b.build(root)
        elif api == "run":
            b = xe.XlaBuilder("run")
            b.build(xe.Neg(xe.Parameter(b, 0, "f32[]"))).run(np.float32(1), backend=args[0])
        return {"kind": "ok", "agree": True}
    except BaseException as e:  # noqa: B902
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        out = _describe_error(e)
        # the builder's own functions: the message names the function or the thing refused
        api_names = {"Parameter": ("Parameter", "Shape"), "Constant": ("Constant",), "Shape": ("Shape",),
                     "Shape.parse": ("Shape",), "parse_hlo": ("line", "parse_hlo", "HLO"),
                     "build": ("XlaBuilder", "build"), "run": ("run", "backend")}[api]
        if out["project"] and not any(n in out["message"] for n in api_names):
            out["message"] = "(unnamed) " + out["message"]
        elif out["project"]:
            out["message"] = api + ": " + out["message"]   # classify_op looks for the api's name
        return out


def bad_argument_lists(text, rng):
    """[(args, must_refuse)] for the module ``text``: good arguments with one replaced by a
    bad one (or the wrong count)."""
    import xla_explorer as xe
    comp = xe.parse_hlo(text)
    nrng = np.random.default_rng(rng.randrange(1 << 30))
    try:
        good = [random_value(p.shape, nrng) for p in comp.entry.parameters]
    except ValueError:
        return []
    out = [(good[:-1], True), (good + [np.float32(0)], True)] if good else [([np.float32(0)], True)]
    for i, p in enumerate(comp.entry.parameters):
        s = p.shape
        if not s.is_array:
            continue
        bads = [(None, True), ("abc", True), (2.9, True), (2 ** 70, True), ([1, "a"], True), ({1: 2}, True),
                (np.zeros(s.dims + (2,), s.dtype), True), (np.zeros((3, 5, 7), s.dtype), True)]
        wrong_type = np.float64 if s.dtype != np.float64 else np.float32
        integral = s.dtype.kind in "iub"
        bads[2] = (2.9, integral)
        bads[3] = (2 ** 70, integral or s.element_type == "f16")
        if s.rank:
            bads.append((np.zeros(s.dims, wrong_type), True))
            bads.append((np.asarray(good[i]).tolist(), False))
            if integral:
                bads.append((np.full(s.dims, 2.5).tolist(), True))
        else:
            bads.append((wrong_type(1), True))
            bads.append((True, s.element_type != "pred"))
            bads.append((1e300, s.element_type not in ("f64", "c128")))
            bads.append((-1, s.element_type.startswith("u") or s.element_type == "pred"))
        for value, must in bads:
            args = list(good)
            args[i] = value
            out.append((args, must))
    return out


def classify_args(outcome, must_refuse=True):
    kind = outcome["kind"]
    if kind in ("crash", "hang", "memory"):
        return kind
    if kind == "interrupted":
        return "hang"
    if outcome.get("modified"):
        return "modified"
    if kind == "error":
        if outcome["type"] == "MemoryError":
            return "memory"
        if not outcome["project"]:
            return "bare"
        if not any(w in outcome["message"] for w in ("argument", "takes")):
            return "unnamed"
        return "fine" if outcome.get("agree", True) else "disagree"
    if must_refuse:
        return "accepted"
    return "fine" if outcome.get("agree", True) else "disagree"


def huge_modules():
    """(name, text) of modules whose values are far too big: each must be refused before
    anything is allocated (SizeLimitError), on every backend."""
    head = "HloModule huge\nENTRY e {\n"
    return [
        ("iota", head + "  ROOT i = f32[100000,100000,100] iota(), iota_dimension=0\n}"),
        ("broadcast", head + "  c = f32[] constant(1)\n  ROOT b = f32[1000000,1000000] broadcast(c), dimensions={}\n}"),
        ("reduce of huge", head + "  i = f32[1000000,100000] iota(), iota_dimension=1\n  z = f32[] constant(0)\n"
                                  "  ROOT r = f32[1000000] reduce(i, z), dimensions={1}, to_apply=add\n}\n"
                                  "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                                  "  ROOT s = f32[] add(a, b)\n}"),
        ("pad", head + "  x = f32[2] parameter(0)\n  z = f32[] constant(0)\n"
                       "  ROOT p = f32[100000000002] pad(x, z), padding=0_100000000000\n}"),
        ("dims near 2**63", head + "  ROOT i = s32[4611686018427387904,2] iota(), iota_dimension=0\n}"),
        ("dot", head + "  a = f32[100000,1] parameter(0)\n  ROOT d = f32[100000,100000] dot(a, a), "
                       "lhs_contracting_dims={1}, rhs_contracting_dims={1}\n}"),
        ("concatenate", head + "  c = f32[] constant(1)\n  b = f32[40000,40000] broadcast(c), dimensions={}\n"
                               "  ROOT r = f32[80000,40000] concatenate(b, b), dimensions={0}\n}"),
        ("rng", head + "  a = f32[] constant(0)\n  b = f32[] constant(1)\n"
                       "  ROOT r = f32[50000,50000] rng(a, b), distribution=rng_uniform\n}"),
        ("while of huge", head + "  c = s32[] constant(0)\n  ROOT w = s32[] while(c), condition=cond, body=body\n}\n"
                                 "cond {\n  p = s32[] parameter(0)\n  k = s32[] constant(1)\n"
                                 "  ROOT l = pred[] compare(p, k), direction=LT\n}\n"
                                 "body {\n  p = s32[] parameter(0)\n  i = s32[100000,100000] iota(), iota_dimension=0\n"
                                 "  ROOT q = s32[] add(p, p)\n}"),
    ]


if __name__ == "__main__" and sys.argv[1:] == ["--worker"]:
    sys.path.insert(0, HERE)
    import fuzzkit   # the cases' classes (Fn) must be fuzzkit's, as the parent pickled them
    fuzzkit._worker_main()
