"""Exercises on the rest of the data-movement ops (Copy, Bitcast, DynamicReshape,
SelectAndScatter, TopK) and on the families that had none: rng (RngBitGenerator) and
custom-call (the ``Sharding`` annotation).  The collectives are in ``collective``."""
import numpy as np

from .. import ops
from ..shapes import Shape
from .core import Call, Computation, Generator, computation, distinct, ints, register, spec_literal


def _pick(rng, seq):
    return seq[int(rng.integers(len(seq)))]


# -- Copy ---------------------------------------------------------------------------------------

class CopyExercises(Generator):
    opcode = "copy"
    kinds = ("values", "read")
    rule = ("Copy (an HLO instruction XLA inserts to change an array's layout in memory) returns its operand: "
            "the logical array, index by index, is unchanged.")
    formula = "result[result_index] = operand[result_index]"
    read_formula = formula

    def problem(self, rng, level, kind):
        dims = [ints(rng, 3, 5)] if level == 1 else [ints(rng, 2, 3) for _ in range(level)]
        return Call("copy", [("operand", distinct(rng, dims, level))], {}, [("operand", "operand")])


# -- Bitcast ---------------------------------------------------------------------------------------

class BitcastExercises(Generator):
    opcode = "bitcast"
    kinds = ("values", "read", "legal")
    shape_attrs = ("shape",)  # a fix exercise asks for the shape that holds the operand's bits
    rule = ("Bitcast (optimized HLO) sees the operand's bytes as another shape holding the same number of bits; "
            "with the same element type it is a row-major reshape.")
    formula = ("linear = the row-major position of result_index in the new shape; result[result_index] = "
               "operand[the index at row-major position linear]")
    read_formula = formula

    def _call(self, operand, shape):
        return Call("bitcast", [("operand", operand)], {"shape": Shape.parse(shape)},
                    [("operand", "operand"), ("shown", "shape", shape)])

    def problem(self, rng, level, kind):
        n = _pick(rng, [6, 8] if level == 1 else [6, 8, 12])
        factors = {6: [(2, 3), (3, 2), (6,)], 8: [(2, 4), (4, 2), (2, 2, 2), (8,)], 12: [(3, 4), (2, 6), (2, 2, 3)]}[n]
        old = (n,) if level == 1 else _pick(rng, [f for f in factors if len(f) > 1])
        new = old
        while new == old:
            new = _pick(rng, factors)
        operand = distinct(rng, old, level)
        return self._call(operand, str(Shape("s32", new)))

    def mutations(self, call):
        shape = call.attrs["shape"]
        dims = tuple(shape.dims)
        return [("shape", lambda c, rng: self._call(c.value("operand"), str(Shape("s32", dims[:-1] + (dims[-1] + 1,))))),
                ("shape", lambda c, rng: self._call(c.value("operand"), str(Shape("s64", dims))))]

    def shape_steps(self, call, shape):
        return [f"{call.attrs['shape']} holds as many bits as the operand {Shape.of(call.value('operand'))}: legal.",
                f"The result is {shape}."]


# -- DynamicReshape -------------------------------------------------------------------------------

class DynamicReshapeExercises(Generator):
    opcode = "dynamic-reshape"
    kinds = ("values",)
    rule = ("DynamicReshape refills the operand's elements, in row-major order, into an array whose sizes "
            "dim_sizes are given at run time (bounded by new_size_bounds); dims_are_dynamic marks the result "
            "dimensions whose size may change from run to run.")
    formula = ("result sizes = dim_sizes (at run time); result[result_index] = operand[the index at the same "
               "row-major position]")
    read_formula = formula

    def problem(self, rng, level, kind):
        n = _pick(rng, [6, 8, 12])
        a = _pick(rng, [d for d in (2, 3, 4) if n % d == 0])
        sizes = (a, n // a)
        old = (n,) if level == 1 else _pick(rng, [s for s in ((2, n // 2), (n // 2, 2)) if s != sizes] or [(n,)])
        bounds = tuple(s + (level - 1) for s in sizes)
        dynamic = (True, False) if level < 3 else (True, True)
        shape = Shape("s32", [None if d else b for b, d in zip(bounds, dynamic)],
                      bounds=[b if d else None for b, d in zip(bounds, dynamic)])
        names = ["size0", "size1"]
        return Call("dynamic-reshape", [("operand", distinct(rng, old, level))]
                    + [(nm, np.int32(s)) for nm, s in zip(names, sizes)], {"shape": shape},
                    [("operand", "operand"), ("list", names), ("shown", "new_size_bounds", bounds),
                     ("shown", "dims_are_dynamic", dynamic)], args={nm: "dim_sizes" for nm in names})

    def shape_steps(self, call, shape):
        return [f"The result type is {shape}: its dynamic dimensions get their sizes from dim_sizes at run time."]


# -- SelectAndScatter --------------------------------------------------------------------------------

def _ge():
    return Computation("ge", lambda a, b: ops.Ge(a, b), "ge(a, b) = a >= b", "lambda a, b: xe.Ge(a, b)",
                       numpy=lambda a, b: a >= b)


class SelectAndScatterExercises(Generator):
    opcode = "select-and-scatter"
    kinds = ("values", "legal")
    rule = ("SelectAndScatter is the gradient of max pooling: in each window of operand, select picks one "
            "element (ge: the first largest), and the window's source value is combined into the result at "
            "that element with scatter; elements nobody picks keep init_value.")
    formula = ("for each window w: i = the element of window w that select keeps; "
               "result[i] = scatter(result[i], source[w]); elsewhere result = init_value")

    def problem(self, rng, level, kind):
        if level == 1:
            dims, window, stride = [ints(rng, 4, 6)], (2,), (2,)
        else:
            dims, window = [ints(rng, 3, 4), ints(rng, 3, 4)], (2, 2)
            stride = (1, 1) if level == 3 else (2, 2)
        operand = distinct(rng, dims, 2)
        out = [(d - w) // s + 1 for d, w, s in zip(dims, window, stride)]
        source = (np.arange(1, int(np.prod(out)) + 1) * 10).reshape(out).astype(np.int32)
        padding = tuple((0, 0) for _ in dims)
        return Call("select-and-scatter", [("operand", operand), ("source", source), ("init_value", np.int32(0))],
                    {"window_dimensions": window, "window_strides": stride, "padding": padding,
                     "select": _ge(), "scatter": computation("add", "add")},
                    [("operand", "operand"), ("attr", "select"), ("attr", "window_dimensions"),
                     ("attr", "window_strides"), ("attr", "padding"), ("kwoperand", "source"),
                     ("kwoperand", "init_value"), ("attr", "scatter")])

    def mutations(self, call):
        src = call.value("source")
        wd = call.attrs["window_dimensions"]
        return [("source", lambda c, rng: c.with_operand("source", np.zeros(np.shape(src)[:-1] + (np.shape(src)[-1] + 1,),
                                                                           np.int32))),
                ("window_dimensions", lambda c, rng: c.with_attrs(window_dimensions=wd + (1,)))]

    def values_steps(self, call, result, k=None):
        return [self.formula, f"result = {spec_literal(result, 9)}"]

    def value_steps(self, call, index, result, k=None):
        return self.values_steps(call, result)

    def shape_steps(self, call, shape):
        return [f"The result has the operand's shape: {shape}; source has one element per window."]


# -- TopK ---------------------------------------------------------------------------------------------

class TopKExercises(Generator):
    opcode = "topk"
    kinds = ("values", "legal")
    rule = ("TopK returns the k largest entries along the last dimension, in order, and their indices; equal "
            "entries come lower index first.")
    formula = "values[..., j] = the j-th largest entry of the row; indices[..., j] = where it was"

    def problem(self, rng, level, kind):
        dims = [ints(rng, 5, 6)] if level == 1 else [ints(rng, 2, 3), ints(rng, 4, 5)]
        operand = distinct(rng, dims, 2)
        if level == 3:
            operand[..., -1] = operand[..., 0]  # a tie: the lower index comes first
        return Call("topk", [("operand", operand)], {"k": ints(rng, 2, 3), "largest": True},
                    [("operand", "operand"), ("attr", "k")])

    def mutations(self, call):
        n = np.shape(call.value("operand"))[-1]
        return [("k", lambda c, rng: c.with_attrs(k=n + 1))]

    def values_steps(self, call, result, k=None):
        return [self.formula, f"result = {spec_literal(result, 9)}"]

    def value_steps(self, call, index, result, k=None):
        return self.values_steps(call, result)

    def shape_steps(self, call, shape):
        return [f"The result is {shape}: k entries of the last dimension, and as many s32 indices."]


# -- RngBitGenerator (the rng family) ----------------------------------------------------------------

class RngBitGeneratorExercises(Generator):
    opcode = "rng-bit-generator"
    kinds = ("shape", "legal")
    rule = ("RngBitGenerator returns (new_state, bits): the state has the initial state's shape (the counter "
            "advanced), the bits the requested shape, of an unsigned type.")
    formula = "result = (new_state: the initial_state's shape, bits: shape)"
    type_rule = "the result is a tuple (state, bits)"

    def _call(self, state, algorithm, shape):
        return Call("rng-bit-generator", [("initial_state", state)],
                    {"algorithm": algorithm, "shape": Shape.parse(shape)},
                    [("pos", "algorithm", algorithm), ("operand", "initial_state"), ("pos", "shape", shape)])

    def problem(self, rng, level, kind):
        algorithm = _pick(rng, ["rng_three_fry", "rng_philox", "rng_default"])
        n = 3 if algorithm == "rng_philox" and level == 3 else 2
        state = np.array([ints(rng, 1, 9), 0, 0][:n], np.uint64)
        etype = _pick(rng, ["u32", "u64"] if level > 1 else ["u32"])
        dims = [ints(rng, 2, 4)] if level == 1 else [ints(rng, 2, 3), ints(rng, 2, 4)]
        return self._call(state, algorithm, str(Shape(etype, dims)))

    def mutations(self, call):
        state, algo = call.value("initial_state"), call.attrs["algorithm"]
        shape = call.attrs["shape"]
        return [("initial_state", lambda c, rng: self._call(np.zeros(5, np.uint64), algo, str(shape))),
                ("initial_state", lambda c, rng: self._call(state.astype(np.uint32), algo, str(shape)))]

    def shape_steps(self, call, shape):
        return [f"new_state has the initial_state's shape {Shape.of(call.value('initial_state'))}; the bits have "
                f"the requested shape {call.attrs['shape']}.", f"The result is {shape}."]


# -- CustomCall (the custom_call family): the Sharding annotation ------------------------------------

class CustomCallExercises(Generator):
    opcode = "custom-call"
    kinds = ("values",)
    titles = {"values": "what does a Sharding custom-call compute?"}
    rule = ("A custom-call runs code XLA does not know by name. Target \"Sharding\" is only an annotation for "
            "the SPMD partitioner (how to split the array over devices): run on one device, it returns its "
            "operand unchanged.")
    formula = "custom_call_target=\"Sharding\": result = operand"

    def problem(self, rng, level, kind):
        dims = [ints(rng, 3, 4)] if level == 1 else [2, ints(rng, 2, 3)]
        operand = distinct(rng, dims, level)
        sharding = _pick(rng, ["{replicated}", "{devices=[2,1]<=[2]}", "{maximal device=0}"])
        return Call("custom-call", [("operand", operand)],
                    {"custom_call_target": "Sharding", "shape": Shape.of(operand), "sharding": sharding},
                    [("pos", "call_target_name", "Sharding"), ("list", ["operand"]),
                     ("pos", "shape", str(Shape.of(operand)))],
                    note=f"The HLO instruction carries sharding={sharding}; the program runs on one device.")

    def values_steps(self, call, result, k=None):
        return [self.formula, f"result = {spec_literal(result, 9)}"]

    def value_steps(self, call, index, result, k=None):
        return self.values_steps(call, result)


for _g in (CopyExercises, BitcastExercises, DynamicReshapeExercises, SelectAndScatterExercises, TopKExercises,
           RngBitGeneratorExercises, CustomCallExercises):
    register(_g())
