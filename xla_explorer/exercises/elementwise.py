"""Exercises on element-wise ops where XLA pins down what C leaves open: Select, Clamp,
integer division and remainder by zero, shifts by the bit width or more, float-to-integer
conversion (saturation, NaN) and narrowing conversions."""
import numpy as np

from .. import dtypes
from .core import Call, Generator, index_text, ints, register, scalar_text, spec_literal


def _choose(rng, pool, n):
    return [pool[int(i)] for i in rng.choice(len(pool), size=n, replace=len(pool) < n)]


class _ElementwiseGenerator(Generator):
    """Values are explained element by element (results are short)."""

    kinds = ("values", "legal")

    def values_steps(self, call, result, k=None):
        lines = [self.formula]
        for idx in np.ndindex(*np.shape(result)):
            lines += self.value_steps(call, idx, result)
        return lines + [f"result = {spec_literal(result, 9)}"]

    def shape_steps(self, call, shape):
        return [f"An element-wise op keeps the operands' dimensions: {shape}."]


class SelectExercises(_ElementwiseGenerator):
    opcode = "select"
    rule = ("Select picks, element by element, on_true where pred is true and on_false where it is false; "
            "a scalar pred picks a whole operand.")
    formula = "result[i] = on_true[i] if pred[i] else on_false[i] (a scalar pred: on_true if pred else on_false)"

    def problem(self, rng, level, kind):
        dims = [ints(rng, 4, 5)] if level == 1 else [2, 3]
        n = int(np.prod(dims))
        scalar = level >= 2 and rng.random() < 0.4
        pred = np.bool_(rng.random() < 0.5) if scalar else (rng.random(dims) < 0.5)
        on_true = np.arange(1, n + 1).reshape(dims).astype(np.int32)
        on_false = (100 * on_true).astype(np.int32)
        if level == 3:
            pool = [np.nan, -0.0, np.inf, 1.5, -2.0, 0.0]
            on_true = np.array(_choose(rng, pool, n), np.float32).reshape(dims)
            on_false = (np.arange(n) + 10).reshape(dims).astype(np.float32)
        return Call("select", [("pred", pred), ("on_true", on_true), ("on_false", on_false)], {},
                    [("operand", "pred"), ("operand", "on_true"), ("operand", "on_false")])

    def mutations(self, call):
        pred, on_false = call.value("pred"), call.value("on_false")
        return [("pred", lambda c, rng: c.with_operand("pred", np.ones(np.shape(on_false)[:-1] + (7,), bool))),
                ("pred", lambda c, rng: c.with_operand("pred", np.asarray(pred).astype(np.int32))),
                ("on_false", lambda c, rng: c.with_operand(
                    "on_false", on_false.astype(np.float32 if on_false.dtype == np.int32 else np.int32)))]

    def value_steps(self, call, index, result, k=None):
        pred = np.asarray(call.value("pred"))
        p = bool(pred[()] if pred.ndim == 0 else pred[index])
        where = "pred" if pred.ndim == 0 else f"pred{index_text(index)}"
        src = "on_true" if p else "on_false"
        return [f"result{index_text(index)}: {where} is {'true' if p else 'false'}, so {src}{index_text(index)} = "
                f"{scalar_text(call.value(src)[index])}"]


class ClampExercises(_ElementwiseGenerator):
    opcode = "clamp"
    rule = ("Clamp limits every element of operand to the range [min, max]; min and max are scalars or arrays "
            "of the operand's shape.  NaN propagates.")
    formula = "result[i] = min(max(operand[i], min[i]), max[i])  (where min > max this gives max)"

    def problem(self, rng, level, kind):
        n = ints(rng, 5, 6)
        if level == 3:
            operand = np.array(_choose(rng, [np.nan, np.inf, -np.inf, 2.5, -7.0, 0.5, 9.0], n), np.float32)
            return self._call(np.float32(ints(rng, -1, 0)), operand, np.float32(ints(rng, 3, 5)))
        operand = rng.integers(-3, 11, size=n).astype(np.int32)
        if level == 1:
            return self._call(np.int32(ints(rng, 0, 2)), operand, np.int32(ints(rng, 5, 7)))
        lo = rng.integers(-2, 3, size=n).astype(np.int32)
        hi = (lo + rng.integers(2, 6, size=n)).astype(np.int32)
        j = int(rng.integers(n))
        lo[j], hi[j] = hi[j], lo[j]  # min > max here: the result is max
        return self._call(lo, operand, hi)

    def _call(self, lo, operand, hi):
        return Call("clamp", [("min", lo), ("operand", operand), ("max", hi)], {},
                    [("operand", "min"), ("operand", "operand"), ("operand", "max")])

    def mutations(self, call):
        operand, hi = call.value("operand"), call.value("max")
        return [("min", lambda c, rng: c.with_operand("min", np.zeros(operand.shape[0] + 1, operand.dtype))),
                ("max", lambda c, rng: c.with_operand("max", np.asarray(hi).astype(
                    np.float64 if operand.dtype == np.float32 else np.float32)[()]))]

    def value_steps(self, call, index, result, k=None):
        def at(name):
            v = np.asarray(call.value(name))
            return scalar_text(v[()] if v.ndim == 0 else v[index])
        lo, x, hi = at("min"), at("operand"), at("max")
        return [f"result{index_text(index)} = min(max({x}, {lo}), {hi}) = {scalar_text(result[index])}"
                + (" (min > max: the result is max)" if _gt(lo, hi) else "")
                + (" (NaN propagates)" if x == "NaN" else "")]


def _gt(a, b):
    try:
        return float(a) > float(b)
    except ValueError:
        return False


# -- integer edge cases ---------------------------------------------------------------------------

_INT_RULES = {
    "divide": ("Integer division rounds toward zero; XLA defines what C leaves undefined: x / 0 = -1 (all bits "
               "set, the maximum for unsigned types) and INT_MIN / -1 = INT_MIN (it wraps).",
               "result[i] = trunc(lhs[i] / rhs[i]); lhs / 0 = -1 (all bits set); INT_MIN / -1 = INT_MIN"),
    "remainder": ("The remainder has the sign of the dividend (C's %); XLA defines x % 0 = x and INT_MIN % -1 = 0.",
                  "result[i] = lhs[i] - rhs[i] * trunc(lhs[i] / rhs[i]); lhs % 0 = lhs; INT_MIN % -1 = 0"),
    "shift-left": ("Shift amounts are read as unsigned numbers; bits shifted past the top are lost (the result "
                   "wraps); an amount >= the bit width gives 0.",
                   "result[i] = lhs[i] << rhs[i] in the type's bits, 0 when rhs[i] (as unsigned) >= bit width"),
    "shift-right-logical": ("A logical right shift fills with zeros, so a negative number becomes a large "
                            "positive one; an amount >= the bit width (read as unsigned) gives 0.",
                            "result[i] = the bits of lhs[i] moved right by rhs[i], zeros in; 0 when rhs[i] >= "
                            "bit width"),
    "shift-right-arithmetic": ("An arithmetic right shift copies the top bit into the vacated bits (on unsigned "
                               "types too); an amount >= the bit width gives all copies of the top bit (0 or -1).",
                               "result[i] = lhs[i] >> rhs[i] with the top bit copied in; the sign fill when rhs[i] "
                               ">= bit width"),
}


class IntegerExercises(_ElementwiseGenerator):
    """Division, remainder and shifts at the edges: zero divisors, INT_MIN / -1, shift
    amounts of the bit width and more, negative amounts read as unsigned."""

    def __init__(self, opcode):
        self.opcode = opcode
        self.rule, self.formula = _INT_RULES[opcode]
        super().__init__()

    def problem(self, rng, level, kind):
        shift = self.opcode.startswith("shift")
        dtype = np.int32 if level == 1 else [np.int8, np.uint8, np.int32][int(rng.integers(3))]
        if level == 2 and dtype == np.int32:
            dtype = np.uint8
        bits = np.iinfo(dtype).bits
        signed = np.iinfo(dtype).min < 0
        n = 5
        if shift:
            lhs_pool = [1, 3, -8, 100, -1, 64, -128] if signed else [1, 3, 200, 128, 255, 6]
            rhs_pool = [0, 1, 2, 3, 4, 1]
            edge = [bits, bits + 2] + ([-1] if level == 3 and signed else [])
        else:
            lhs_pool = [7, -7, 9, -9, 5, 13, -1] if signed else [7, 200, 13, 9, 255]
            rhs_pool = [2, -2, 3, 4, -4] if signed else [2, 3, 4, 7]
            edge = [0]
        lhs = _choose(rng, lhs_pool, n)
        rhs = _choose(rng, rhs_pool, n)
        rhs[int(rng.integers(n))] = edge[int(rng.integers(len(edge)))]
        if not shift and level == 3 and signed:  # INT_MIN / -1 overflows
            j = next(i for i in range(n) if rhs[i] != 0)
            lhs[j], rhs[j] = int(np.iinfo(dtype).min), -1
        lhs = np.array(lhs).astype(np.int64).astype(dtype)
        rhs = np.array(rhs).astype(np.int64).astype(dtype)
        return Call(self.opcode, [("lhs", lhs), ("rhs", rhs)], {}, [("operand", "lhs"), ("operand", "rhs")])

    def mutations(self, call):
        lhs, rhs = call.value("lhs"), call.value("rhs")
        other = np.int16 if rhs.dtype != np.int16 else np.int32
        muts = [("rhs", lambda c, rng: c.with_operand("rhs", rhs.astype(other)))]
        if self.opcode.startswith("shift"):
            muts.append(("lhs", lambda c, rng: c.with_operand("lhs", lhs.astype(np.float32)).with_operand(
                "rhs", rhs.astype(np.float32))))
        else:
            muts.append(("rhs", lambda c, rng: c.with_operand("rhs", rhs[:-1])))
        return muts

    def value_steps(self, call, index, result, k=None):
        lhs, rhs = call.value("lhs"), call.value("rhs")
        x, y, r = int(lhs[index]), int(rhs[index]), int(result[index])
        info = np.iinfo(lhs.dtype)
        t = dtypes.from_numpy(lhs.dtype)
        head = f"result{index_text(index)} = {x} {_SYMBOL[self.opcode]} {y} = {r}"
        if self.opcode in ("divide", "remainder"):
            if y == 0:
                why = ("division by zero: -1, all bits set" + (f" ({r} in {t})" if info.min == 0 else "")
                       if self.opcode == "divide" else "remainder by zero: the dividend")
            elif x == info.min and y == -1 and info.min < 0:
                why = "INT_MIN / -1 overflows and wraps to INT_MIN" if self.opcode == "divide" else \
                    "INT_MIN % -1 = 0"
            else:
                why = "rounded toward zero" if self.opcode == "divide" else "the sign of the dividend"
            return [f"{head}: {why}"]
        bits = info.bits
        amount = y % (1 << bits)  # read as unsigned
        if amount >= bits:
            why = f"the amount {amount}" + (f" (= {y} read as unsigned)" if y < 0 else "") + \
                f" is >= {bits} bits: " + ("the sign fill" if self.opcode == "shift-right-arithmetic" else "0")
        else:
            ubits = x % (1 << bits)
            why = f"{ubits:0{bits}b} -> {r % (1 << bits):0{bits}b} in {t}"
        return [f"{head}: {why}"]


_SYMBOL = {"divide": "/", "remainder": "%", "shift-left": "<<", "shift-right-logical": ">>>",
           "shift-right-arithmetic": ">>"}


# -- ConvertElementType ---------------------------------------------------------------------------

class ConvertExercises(_ElementwiseGenerator):
    opcode = "convert"
    kinds = ("values",)
    rule = ("ConvertElementType converts each element like C++'s static_cast, with XLA's choices where C is "
            "undefined: floats to integers truncate toward zero, saturate at the type's limits and give 0 "
            "for NaN; integers to narrower integers wrap; floats to narrower floats round to nearest even "
            "and overflow to inf.")
    formula = ("float -> int: trunc, then clamp to [min, max] of the type, NaN -> 0; int -> int: keep the low "
               "bits (wrap); float -> narrower float: round to nearest even, too big -> inf")

    def problem(self, rng, level, kind):
        if level == 1:
            values, source, target = [-1.7, 2.5, 3.9, -0.2, 7.0, -2.5, 0.5, 9.99], np.float32, "s32"
        elif level == 2:
            values = [300.0, -5.0, 127.9, np.nan, 42.7, -0.9, 255.5, 1e10, -1e10, np.inf]
            source, target = np.float32, ["u8", "s8"][int(rng.integers(2))]
        else:
            case = int(rng.integers(3))
            if case == 0:
                values, source, target = [200, -129, 256, 127, -300, 1000], np.int32, ["s8", "u8"][int(rng.integers(2))]
            elif case == 1:
                values, source, target = [65519.0, 65520.0, 2049.0, 2051.0, 1e-9, -70000.0], np.float32, "f16"
            else:
                values, source, target = [3e9, -3e9, -np.inf, np.nan, 2147483520.0, -1.5], np.float32, "s32"
        operand = np.array(_choose(rng, values, 5), np.float64).astype(source)
        return Call("convert", [("operand", operand)], {"new_element_type": target},
                    [("operand", "operand"), ("attr", "new_element_type")])

    def value_steps(self, call, index, result, k=None):
        x = call.value("operand")[index]
        r = result[index]
        target = call.attrs["new_element_type"]
        head = f"result{index_text(index)} = convert({scalar_text(x)}) = {scalar_text(r)}"
        if target in dtypes.INTEGRAL:
            info = dtypes.iinfo(target)
            if np.issubdtype(np.asarray(x).dtype, np.integer):
                return [f"{head}: integers wrap: {int(x)} mod 2^{dtypes.bit_width(target)} read as {target}"]
            if np.isnan(x):
                return [f"{head}: NaN converts to 0"]
            t = np.trunc(float(x))
            if t > int(info.max) or t < int(info.min):
                return [f"{head}: out of range for {target}, it saturates at "
                        f"{int(info.max) if t > 0 else int(info.min)}"]
            return [f"{head}: truncated toward zero"]
        if np.isinf(float(r)) and np.isfinite(float(x)):
            return [f"{head}: too big for {target}, it overflows to inf"]
        return [f"{head}: rounded to the nearest {target} (ties to even)"]


for _g in (SelectExercises(), ClampExercises(), ConvertExercises(),
           *(IntegerExercises(op) for op in _INT_RULES)):
    register(_g)
