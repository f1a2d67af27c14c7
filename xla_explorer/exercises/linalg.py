"""Exercises on DotGeneral (contracting and batch dimensions) and convolution (padding,
strides, dilations)."""
import numpy as np

from .core import Call, Generator, index_text, ints, register, spec_attr

_DOT_ATTRS = ("lhs_contracting_dimensions", "rhs_contracting_dimensions", "lhs_batch_dimensions",
              "rhs_batch_dimensions")


def _replace(t, i, v):
    t = list(t)
    t[i] = v
    return tuple(t)


def _small(rng, dims, dtype=np.int32):
    return rng.integers(0, 4, size=dims).astype(dtype)


class DotExercises(Generator):
    opcode = "dot"
    read_mode = "pairs"
    hidden = ("lhs_contracting_dimensions", "rhs_contracting_dimensions")
    type_rule = "the result has the operands' element type (or preferred_element_type)"
    rule = ("DotGeneral multiplies lhs and rhs elements that agree on the contracting dimensions and sums the "
            "products; batch dimensions pair up without being summed.  The result has the batch dimensions, "
            "then lhs's free dimensions, then rhs's free dimensions.")
    formula = ("result[b..., l..., r...] = sum over c... of lhs[b..., l..., c...] * rhs[b..., c..., r...] (each "
               "group at the dimensions the attributes name); shape(result) = batch + lhs free + rhs free")
    read_formula = formula

    def problem(self, rng, level, kind):
        m, k, n = ints(rng, 2, 3), ints(rng, 2, 3), ints(rng, 2, 3)
        lb = rb = ()
        if level == 1:
            if rng.random() < 0.3:  # matrix . vector
                lhs, rhs, lc, rc = _small(rng, [m, k]), _small(rng, [k]), (1,), (0,)
            else:
                lhs, rhs, lc, rc = _small(rng, [m, k]), _small(rng, [k, n]), (1,), (0,)
        elif level == 2:  # contracting dimensions elsewhere
            lc, rc = (ints(rng, 0, 1),), (ints(rng, 0, 1),)
            ldims, rdims = [m, m], [n, n]
            ldims[lc[0]], rdims[rc[0]] = k, k
            ldims[1 - lc[0]] = m if m != k else m + 1 if m < 3 else 2
            lhs, rhs = _small(rng, ldims), _small(rng, rdims)
        else:  # a batch dimension
            b = 2
            lb, rb = (0,), (ints(rng, 0, 2),)
            lc, rc = (2,), (1 if rb[0] != 1 else 2,)
            free_r = next(d for d in range(3) if d not in rb + rc)
            rdims = [0, 0, 0]
            rdims[rb[0]], rdims[rc[0]], rdims[free_r] = b, k, n
            lhs, rhs = _small(rng, [b, m, k]), _small(rng, rdims)
        attrs = {"lhs_contracting_dimensions": lc, "rhs_contracting_dimensions": rc,
                 "lhs_batch_dimensions": lb, "rhs_batch_dimensions": rb}
        shown = [a for a in _DOT_ATTRS if attrs[a] or "contracting" in a]
        return Call("dot", [("lhs", lhs), ("rhs", rhs)], attrs,
                    [("operand", "lhs"), ("operand", "rhs")] + [("attr", a) for a in shown])

    def mutations(self, call):
        a = call.attrs
        lhs, rhs = call.value("lhs"), call.value("rhs")
        lc, rc = a["lhs_contracting_dimensions"], a["rhs_contracting_dimensions"]
        muts = [("rhs_contracting_dimensions", lambda c, rng: c.with_attrs(rhs_contracting_dimensions=())),
                ("lhs_contracting_dimensions",
                 lambda c, rng: c.with_attrs(lhs_contracting_dimensions=lc + (lhs.ndim,)))]
        other = [d for d in range(lhs.ndim) if d not in lc + a["lhs_batch_dimensions"]
                 and lhs.shape[d] != rhs.shape[rc[0]]]
        if other:
            muts.append(("lhs_contracting_dimensions",
                         lambda c, rng: c.with_attrs(lhs_contracting_dimensions=(other[0],))))
        if a["lhs_batch_dimensions"]:
            muts.append(("lhs_batch_dimensions", lambda c, rng: c.with_attrs(lhs_batch_dimensions=lc)))
        return muts

    def shape_steps(self, call, shape):
        a = call.attrs
        lhs, rhs = np.shape(call.value("lhs")), np.shape(call.value("rhs"))
        lb, lc, rb, rc = (a["lhs_batch_dimensions"], a["lhs_contracting_dimensions"], a["rhs_batch_dimensions"],
                          a["rhs_contracting_dimensions"])
        lfree = [d for d in range(len(lhs)) if d not in lb + lc]
        rfree = [d for d in range(len(rhs)) if d not in rb + rc]
        return [
            "contracting sizes agree: " + ", ".join(f"lhs dimension {x} ({lhs[x]}) with rhs dimension {y} ({rhs[y]})"
                                                     for x, y in zip(lc, rc)) + "; they are summed away.",
            f"batch dimensions {spec_attr([lhs[d] for d in lb])}, then lhs's free dimensions {spec_attr(lfree)} "
            f"(sizes {spec_attr([lhs[d] for d in lfree])}), then rhs's free dimensions {spec_attr(rfree)} (sizes "
            f"{spec_attr([rhs[d] for d in rfree])})",
            f"The result is {shape}.",
        ]

    def access_steps(self, call, access):
        lhs, rhs = call.value("lhs"), call.value("rhs")
        pairs = access.detail["pairs"]
        lines = [self.read_formula,
                 f"batch index {list(access.detail['batch_index'])}, lhs free index "
                 f"{list(access.detail['lhs_free_index'])}, rhs free index {list(access.detail['rhs_free_index'])}; "
                 "the contracting index runs over all its values:"]
        lines += [f"  lhs{index_text(li)} * rhs{index_text(ri)} = {lhs[li]} * {rhs[ri]}" for li, ri in pairs]
        total = sum(int(lhs[li]) * int(rhs[ri]) for li, ri in pairs)
        return lines + [f"result{index_text(access.index)} = {total}"]

    def read_question(self, call, index):
        return (f"Which products lhs[...] * rhs[...] are summed into result{index_text(index)}?\n"
                "Answer a list of index pairs, e.g. [((0, 1), (1, 0)), ((0, 2), (2, 0))].")

    def attribute_steps(self, call, hidden):
        a = call.attrs
        return [f"lhs_contracting_dimensions = {spec_attr(a['lhs_contracting_dimensions'])}, "
                f"rhs_contracting_dimensions = {spec_attr(a['rhs_contracting_dimensions'])}: the contracted sizes must "
                "agree and disappear from the result; the target's dimensions are the remaining ones."]


class ConvExercises(Generator):
    opcode = "convolution"
    read_mode = "pairs"
    hidden = ("padding",)
    type_rule = "the result has the inputs' element type"
    rule = ("The convolution slides the kernel (rhs, its cells rhs_dilation apart) by window_strides over the "
            "input (lhs, lhs_dilation - 1 zeros between elements, padded by padding) and sums the products; "
            "lhs is [batch, feature, spatial...] and rhs [output feature, input feature, spatial...].")
    formula = ("dim(result, spatial d) = (padded - window) // window_strides[d] + 1 with padded = pad_low + "
               "(dim(lhs, d) - 1) * lhs_dilation[d] + 1 + pad_high and window = (dim(rhs, d) - 1) * "
               "rhs_dilation[d] + 1; result[b, o, x] = sum over i, k of padded_lhs[b, i, x * stride + k * "
               "rhs_dilation] * rhs[o, i, k]")
    read_formula = formula

    def problem(self, rng, level, kind):
        for _ in range(200):
            if level == 1:
                spatial, feat_in, feat_out = 1, 1, 1
                sizes, ksizes = [ints(rng, 4, 6)], [ints(rng, 2, 3)]
                strides, padding, ld, rd = [1], [(0, 0)], [1], [1]
            elif level == 2:
                spatial, feat_in, feat_out = 1, ints(rng, 1, 2), ints(rng, 1, 2)
                sizes, ksizes = [ints(rng, 4, 6)], [ints(rng, 2, 3)]
                strides, padding, ld, rd = [ints(rng, 1, 2)], [(ints(rng, 0, 2), ints(rng, 0, 2))], [1], [1]
            else:
                spatial = ints(rng, 1, 2)
                feat_in, feat_out = 1, ints(rng, 1, 2)
                sizes = [ints(rng, 3, 5)] if spatial == 1 else [3, 3]
                ksizes = [2] * spatial
                strides = [ints(rng, 1, 2) for _ in range(spatial)]
                padding = [(ints(rng, -1, 1), ints(rng, 0, 1)) for _ in range(spatial)]
                ld = [ints(rng, 1, 2) for _ in range(spatial)]
                rd = [ints(rng, 1, 2) for _ in range(spatial)]
                if ld == [1] * spatial and rd == [1] * spatial:
                    rd[0] = 2
            out = [(lo + (n - 1) * a + 1 + hi - ((k - 1) * b + 1)) // s + 1
                   for n, k, s, (lo, hi), a, b in zip(sizes, ksizes, strides, padding, ld, rd)]
            if not (all(o > 0 for o in out) and int(np.prod(out)) * feat_out <= 24):
                continue
            lhs = _small(rng, [1, feat_in] + sizes, np.float32)
            rhs = rng.integers(-1, 3, size=[feat_out, feat_in] + ksizes).astype(np.float32)
            attrs = {"window_strides": tuple(strides), "padding": tuple(padding), "lhs_dilation": tuple(ld),
                     "rhs_dilation": tuple(rd)}
            call = Call("convolution", [("lhs", lhs), ("rhs", rhs)], attrs,
                        [("operand", "lhs"), ("operand", "rhs")] + [("attr", k) for k in attrs],
                        note="Layout (the spec's default): lhs is [batch, feature, spatial...], rhs is "
                             "[output feature, input feature, spatial...], the result [batch, feature, spatial...].")
            if sum(1 for a in call.index_map() if a.reads) * 2 > int(np.prod(out)) * feat_out:
                return call  # most windows see some input
        raise RuntimeError("convolution: no problem found")  # pragma: no cover

    def mutations(self, call):
        a = call.attrs
        rhs = call.value("rhs")
        wrong = list(rhs.shape)
        wrong[1] += 1
        return [("rhs", lambda c, rng: c.with_operand("rhs", np.zeros(wrong, rhs.dtype))),
                ("window_strides", lambda c, rng: c.with_attrs(window_strides=_replace(a["window_strides"], 0, 0))),
                ("padding", lambda c, rng: c.with_attrs(padding=a["padding"] + ((0, 0),))),
                ("rhs_dilation", lambda c, rng: c.with_attrs(rhs_dilation=_replace(a["rhs_dilation"], 0, 0))),
                ("rhs", lambda c, rng: c.with_operand("rhs", rhs[0]))]

    def shape_steps(self, call, shape):
        a = call.attrs
        lhs, rhs = np.shape(call.value("lhs")), np.shape(call.value("rhs"))
        lines = [f"batch: dim(lhs, 0) = {lhs[0]}; feature: the kernel's output features dim(rhs, 0) = {rhs[0]}"]
        for d in range(len(lhs) - 2):
            n, k = lhs[2 + d], rhs[2 + d]
            lo, hi = a["padding"][d]
            ld, rd, s = a["lhs_dilation"][d], a["rhs_dilation"][d], a["window_strides"][d]
            dil = (n - 1) * ld + 1
            padded, win = lo + dil + hi, (k - 1) * rd + 1
            lines.append(f"spatial dimension {d}: padded = {lo} + ({n} - 1) * {ld} + 1 + {hi} = {padded}; window = "
                         f"({k} - 1) * {rd} + 1 = {win}; size = ({padded} - {win}) // {s} + 1 = {shape.dims[2 + d]}")
        return lines + [f"The result is {shape}."]

    def access_steps(self, call, access):
        lhs, rhs = call.value("lhs"), call.value("rhs")
        pairs = access.detail["pairs"]
        lines = [self.read_formula]
        lines += [f"  lhs{index_text(li)} * rhs{index_text(ri)} = {lhs[li]:g} * {rhs[ri]:g}" for li, ri in pairs]
        skipped = access.detail.get("window_positions_in_padding", 0)
        if skipped:
            lines.append(f"  ({skipped} window position{'s' if skipped > 1 else ''} fall in padding or in the holes "
                         "of the lhs dilation: nothing to multiply there)")
        total = sum(float(lhs[li]) * float(rhs[ri]) for li, ri in pairs)
        return lines + [f"result{index_text(access.index)} = {total:g}"]

    def read_question(self, call, index):
        return (f"Which products lhs[...] * rhs[...] are summed into result{index_text(index)}?\n"
                "Answer a list of index pairs, e.g. [((0, 0, 1), (0, 0, 0)), ((0, 0, 2), (0, 0, 1))] "
                "([] if the window only covers padding).")

    def attribute_steps(self, call, hidden):
        return [f"padding = {spec_attr(call.attrs['padding'])} ((low, high) per spatial dimension):"] + \
            self.shape_steps(call, call.shape())[1:]

    def normalize_attr(self, kw, value):
        value = super().normalize_attr(kw, value)
        if kw == "padding" and isinstance(value, tuple) and value and not isinstance(value[0], tuple):
            value = (value,)  # one spatial dimension: (low, high)
        return value


for _g in (DotExercises, ConvExercises):
    register(_g())
