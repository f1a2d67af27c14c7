"""Exercises on Gather and Scatter: result shapes, clamped starts, skipped windows,
batching dimensions; the index maps' ``Access.detail`` explains every step."""
import numpy as np

from ..shapes import Shape
from .core import Call, Generator, computation, distinct, index_text, ints, register, spec_attr, spec_literal

_GATHER_ATTRS = ("offset_dims", "collapsed_slice_dims", "start_index_map", "operand_batching_dims",
                 "start_indices_batching_dims", "index_vector_dim", "slice_sizes")


def _replace(t, i, v):
    t = list(t)
    t[i] = v
    return tuple(t)


def _stack(columns, batch_shape, axis):
    """Index vectors (one array of ``batch_shape`` per vector entry) stacked at ``axis``."""
    return np.stack([np.asarray(c, np.int64).reshape(batch_shape) for c in columns], axis=axis).astype(np.int32)


class GatherExercises(Generator):
    opcode = "gather"
    hidden = ("slice_sizes",)
    detail_skip = ("batch_dims", "offset_dims", "empty_slice")
    rule = ("Gather takes, for every index vector in start_indices, a slice of slice_sizes at that start "
            "(clamped so the slice is in bounds); the result's batch dimensions run over the index vectors, "
            "its offset_dims over the slice (collapsed_slice_dims of size 1 dropped).")
    formula = ("result[result_index] = operand[full_start_index + full_batching_index + full_offset_index], "
               "full_start_index[start_index_map[k]] = clamp(start_index[k], 0, dim(operand) - slice_sizes); "
               "batch dimensions of the result come from start_indices (without index_vector_dim), offset "
               "dimensions from slice_sizes (without collapsed_slice_dims and operand_batching_dims)")
    read_formula = ("result[result_index] = operand[operand_index], operand_index = full_start_index + "
                    "full_batching_index + full_offset_index, the start clamped to [0, dim(operand) - slice_sizes]")

    def problem(self, rng, level, kind):
        for _ in range(200):
            call = self._attempt(rng, level)
            if call is not None:
                return call
        raise RuntimeError("gather: no problem found")  # pragma: no cover

    def _attempt(self, rng, level):
        if level == 1:
            return self._simple(rng)
        batching = level == 3 and rng.random() < 0.6
        rank = 3 if batching else 2
        odims = [2] + [ints(rng, 3, 4) for _ in range(2)] if batching else [ints(rng, 3, 5) for _ in range(2)]
        batch_dims = (0,) if batching else ()
        free = [d for d in range(rank) if d not in batch_dims]
        sim = [int(d) for d in rng.permutation(free)[:ints(rng, 1, len(free))]]
        if level == 2:
            sim.sort()
        sizes, collapsed = [1] * rank, []
        for d in free:
            if d in sim and rng.random() < 0.5:
                collapsed.append(d)
            else:
                sizes[d] = ints(rng, 1, odims[d] - (1 if d in sim else 0))
        collapsed.sort()
        offset_operand = [d for d in range(rank) if d not in collapsed and d not in batch_dims]
        batch_shape = [2, ints(rng, 2, 3)] if batching else [ints(rng, 2, 3)]
        ivd = len(batch_shape) if level == 2 else ints(rng, 0, len(batch_shape))
        result_rank = len(batch_shape) + len(offset_operand)
        if level == 2:
            offset_dims = tuple(range(len(batch_shape), result_rank))
        else:
            offset_dims = tuple(sorted(int(d) for d in rng.choice(result_rank, len(offset_operand), replace=False)))
        count = int(np.prod(batch_shape))
        columns = []
        for d in sim:
            hi = odims[d] - sizes[d]
            col = rng.integers(0, hi + 1, size=count)
            if level == 3:
                col = rng.integers(-2, odims[d] + 2, size=count)
            elif rng.random() < 0.5:
                col[int(rng.integers(count))] = hi + ints(rng, 1, 2)
            columns.append(col)
        indices = _stack(columns, batch_shape, ivd)
        si_batching = ((0 if ivd > 0 else 1),) if batching else ()
        attrs = {"offset_dims": offset_dims, "collapsed_slice_dims": tuple(collapsed), "start_index_map": tuple(sim),
                 "operand_batching_dims": batch_dims, "start_indices_batching_dims": si_batching,
                 "index_vector_dim": ivd, "slice_sizes": tuple(sizes), "indices_are_sorted": False}
        call = self._call(distinct(rng, odims, level), indices, attrs, level)
        try:
            n = int(np.prod(call.shape().dims))
        except Exception:  # noqa: BLE001 - try another
            return None
        return call if 0 < n <= 48 else None

    def _simple(self, rng):
        if rng.random() < 0.5:  # operand[idx] on a vector: index_vector_dim = rank(start_indices)
            n = ints(rng, 4, 6)
            operand = distinct(rng, [n], 1)
            indices = rng.integers(0, n, size=ints(rng, 2, 4)).astype(np.int32)
            attrs = {"offset_dims": (), "collapsed_slice_dims": (0,), "start_index_map": (0,),
                     "index_vector_dim": 1, "slice_sizes": (1,)}
        else:  # rows of a matrix
            n, m = ints(rng, 3, 4), ints(rng, 2, 4)
            operand = distinct(rng, [n, m], 1)
            indices = rng.integers(0, n, size=(ints(rng, 2, 3), 1)).astype(np.int32)
            attrs = {"offset_dims": (1,), "collapsed_slice_dims": (0,), "start_index_map": (0,),
                     "index_vector_dim": 1, "slice_sizes": (1, m)}
        attrs.update(operand_batching_dims=(), start_indices_batching_dims=(), indices_are_sorted=False)
        return self._call(operand, indices, attrs, 1)

    def _call(self, operand, indices, attrs, level):
        shown = [k for k in _GATHER_ATTRS if k not in ("operand_batching_dims", "start_indices_batching_dims")
                 or attrs[k]]
        return Call("gather", [("operand", operand), ("start_indices", indices)], attrs,
                    [("operand", "operand"), ("operand", "start_indices")] + [("attr", k) for k in shown])

    def mutations(self, call):
        a = call.attrs
        odims = np.shape(call.value("operand"))
        indices = call.value("start_indices")
        offset_operand = [d for d in range(len(odims)) if d not in a["collapsed_slice_dims"]
                          and d not in a["operand_batching_dims"]]
        muts = [
            ("index_vector_dim", lambda c, rng: c.with_attrs(index_vector_dim=indices.ndim + 1)),
            ("start_indices", lambda c, rng: c.with_operand("start_indices", indices.astype(np.float32))),
            ("start_index_map", lambda c, rng: c.with_attrs(
                start_index_map=a["start_index_map"] + a["start_index_map"][:1])),
        ]
        if offset_operand:
            d = offset_operand[-1]
            muts.append(("slice_sizes", lambda c, rng: c.with_attrs(
                slice_sizes=_replace(a["slice_sizes"], d, odims[d] + 1))))
        collapsible = [d for d in a["collapsed_slice_dims"] if odims[d] > 1]
        if collapsible:
            d = collapsible[0]
            muts.append(("slice_sizes", lambda c, rng: c.with_attrs(slice_sizes=_replace(a["slice_sizes"], d, 2))))
        if len(a["offset_dims"]) > 1:
            muts.append(("offset_dims", lambda c, rng: c.with_attrs(offset_dims=a["offset_dims"][::-1])))
        if a["offset_dims"]:
            muts.append(("offset_dims", lambda c, rng: c.with_attrs(offset_dims=a["offset_dims"][:-1])))
        return muts

    def shape_steps(self, call, shape):
        a = call.attrs
        indices = Shape.of(call.value("start_indices"))
        ivd = a["index_vector_dim"]
        batch_dims = [d for d in range(shape.rank) if d not in a["offset_dims"]]
        batch_sizes = [indices.dims[d] for d in range(indices.rank) if d != ivd]
        offset_operand = [d for d in range(len(a["slice_sizes"])) if d not in a["collapsed_slice_dims"]
                          and d not in a["operand_batching_dims"]]
        vector = (f"dimension index_vector_dim={ivd} of start_indices {indices} holds the index vectors"
                  if ivd < indices.rank else
                  f"index_vector_dim={ivd} = rank(start_indices): each element of {indices} is a 1-element "
                  "index vector")
        return [
            vector + ".",
            f"batch dimensions: the result dimensions not in offset_dims={spec_attr(a['offset_dims'])}: "
            f"{spec_attr(batch_dims)}; their sizes are start_indices' dimensions without index_vector_dim: "
            f"{spec_attr(batch_sizes)}",
            f"offset dimensions offset_dims={spec_attr(a['offset_dims'])}: slice_sizes={spec_attr(a['slice_sizes'])} "
            f"without collapsed_slice_dims={spec_attr(a['collapsed_slice_dims'])} and operand_batching_dims="
            f"{spec_attr(a['operand_batching_dims'])}, i.e. operand dimensions {spec_attr(offset_operand)}: "
            f"{spec_attr([a['slice_sizes'][d] for d in offset_operand])}",
            f"The result is {shape} (the operand's element type).",
        ]

    def read_question(self, call, index):
        return (f"Which element of operand does result{index_text(index)} read?\n"
                "Answer with its index, e.g. (2, 0).")

    def attribute_steps(self, call, hidden):
        a = call.attrs
        target = Shape.of(call.run())
        return [f"slice_sizes = {spec_attr(a['slice_sizes'])}: collapsed_slice_dims "
                f"{spec_attr(a['collapsed_slice_dims'])} (and operand_batching_dims) need size 1; the other "
                f"sizes are the target's offset dimensions {spec_attr(a['offset_dims'])} of {target}.",
                "Then the clamped starts must pick the target's elements."]


class ScatterExercises(Generator):
    opcode = "scatter"
    kinds = ("shape", "values", "read", "legal")
    shape_operand = "updates"
    read_mode = "scatter"
    titles = {"read": "where does an update go?", "shape": "which updates shape is legal?"}
    detail_skip = ("update_scatter_dims", "update_window_dims", "schedule_position")
    type_rule = "Scatter returns the operand's shape"
    rule = ("Scatter combines each element of updates into the result (a copy of operand) through "
            "update_computation, at the window given by the start in scatter_indices; XLA skips a window "
            "that does not fit entirely, and applies duplicates in row-major order of the scatter indices.")
    formula = ("result_index = full_start_index + full_batching_index + full_window_index; "
               "result[result_index] = update_computation(result[result_index], updates[update_index]); "
               "updates' dimensions: those of scatter_indices without index_vector_dim (update_scatter_dims) "
               "and one per update_window_dims (at most the operand's size)")
    read_formula = ("result_index = full_start_index + full_batching_index + full_window_index, with "
                    "full_start_index[scatter_dims_to_operand_dims[k]] = start_index[k]; XLA skips the update "
                    "when its window is even partly out of bounds")

    def problem(self, rng, level, kind):
        patterns = {1: ["vector"], 2: ["rows", "windows"], 3: ["windows", "batched"]}[level]
        pattern = patterns[int(rng.integers(len(patterns)))]
        comp_kind = "add" if level == 1 else ["add", "add", "max", "replace"][int(rng.integers(4))]
        comp = computation({"add": "add", "max": "max", "replace": "replace"}[comp_kind], comp_kind)
        base = {"input_batching_dims": (), "scatter_indices_batching_dims": (), "indices_are_sorted": False,
                "unique_indices": False}
        if pattern == "vector":
            n, k = ints(rng, 5, 6), ints(rng, 3, 4)
            operand = distinct(rng, [n], 1)
            idx = rng.integers(0, n, size=k)
            if rng.random() < 0.7:
                idx[-1] = idx[0]  # a duplicate: both updates combine
            indices = idx.reshape(k, 1).astype(np.int32)
            updates = (10 * np.arange(1, k + 1)).astype(np.int32)
            attrs = dict(base, update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,),
                         index_vector_dim=1)
        elif pattern == "rows":
            n, m, k = ints(rng, 3, 4), ints(rng, 2, 3), ints(rng, 2, 3)
            w = ints(rng, 1, m)
            operand = distinct(rng, [n, m], 1)
            idx = rng.integers(0, n + 1, size=k)  # n: out of bounds, skipped
            indices = idx.reshape(k, 1).astype(np.int32)
            updates = (10 * np.arange(1, k * w + 1)).reshape(k, w).astype(np.int32)
            attrs = dict(base, update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,),
                         index_vector_dim=1)
        elif pattern == "windows":
            n, m, k = ints(rng, 3, 4), ints(rng, 3, 4), 2
            a, b = ints(rng, 1, 2), 2
            operand = distinct(rng, [n, m], 1)
            lo = -1 if level == 3 else 0
            starts = np.stack([rng.integers(lo, n - a + 2, size=k), rng.integers(lo, m - b + 2, size=k)], axis=1)
            indices = starts.astype(np.int32)
            updates = (10 * np.arange(1, k * a * b + 1)).reshape(k, a, b).astype(np.int32)
            attrs = dict(base, update_window_dims=(1, 2), inserted_window_dims=(), scatter_dims_to_operand_dims=(0, 1),
                         index_vector_dim=1)
        else:  # batched: operand [B, n], indices [B, k, 1], updates [B, k]
            bsize, n, k = 2, ints(rng, 4, 5), ints(rng, 2, 3)
            operand = distinct(rng, [bsize, n], 1)
            indices = rng.integers(-1, n + 1, size=(bsize, k, 1)).astype(np.int32)
            updates = (10 * np.arange(1, bsize * k + 1)).reshape(bsize, k).astype(np.int32)
            attrs = dict(base, update_window_dims=(), inserted_window_dims=(1,), scatter_dims_to_operand_dims=(1,),
                         index_vector_dim=2, input_batching_dims=(0,), scatter_indices_batching_dims=(0,))
        attrs["update_computation"] = comp
        shown = ["update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims", "index_vector_dim"]
        if attrs["input_batching_dims"]:
            shown[2:2] = ["input_batching_dims", "scatter_indices_batching_dims"]
        return Call("scatter", [("operand", operand), ("scatter_indices", indices), ("updates", updates)], attrs,
                    [("operand", "operand"), ("operand", "scatter_indices"), ("operand", "updates"),
                     ("attr", "update_computation")] + [("attr", k) for k in shown])

    def mutations(self, call):
        a = call.attrs
        indices, updates = call.value("scatter_indices"), call.value("updates")
        odims = np.shape(call.value("operand"))
        bigger = list(updates.shape)
        bigger[0] += 1
        muts = [
            ("updates", lambda c, rng: c.with_operand("updates", np.zeros(bigger, updates.dtype))),
            ("scatter_dims_to_operand_dims", lambda c, rng: c.with_attrs(
                scatter_dims_to_operand_dims=a["scatter_dims_to_operand_dims"] * 2)),
            ("index_vector_dim", lambda c, rng: c.with_attrs(index_vector_dim=indices.ndim + 1)),
        ]
        if len(a["update_window_dims"]) > 1:
            muts.append(("update_window_dims", lambda c, rng: c.with_attrs(
                update_window_dims=a["update_window_dims"][::-1])))
        if a["update_window_dims"]:
            d = a["update_window_dims"][-1]
            window_operand = [x for x in range(len(odims)) if x not in a["inserted_window_dims"]
                              and x not in a["input_batching_dims"]]
            big = list(updates.shape)
            big[d] = odims[window_operand[-1]] + 1
            muts.append(("updates", lambda c, rng: c.with_operand("updates", np.zeros(big, updates.dtype))))
        return muts

    def shape_steps(self, call, shape):
        return [f"Scatter returns the operand's shape: {shape}."] + self.operand_shape_steps(call, "updates")

    def operand_shape_steps(self, call, name):
        a = call.attrs
        indices = Shape.of(call.value("scatter_indices"))
        ivd = a["index_vector_dim"]
        scatter_sizes = [indices.dims[d] for d in range(indices.rank) if d != ivd]
        odims = np.shape(call.value("operand"))
        window_operand = [d for d in range(len(odims)) if d not in a["inserted_window_dims"]
                          and d not in a["input_batching_dims"]]
        return [
            f"updates has rank {len(scatter_sizes)} + {len(a['update_window_dims'])}: the dimensions of "
            f"scatter_indices {indices} without index_vector_dim={ivd} ({spec_attr(scatter_sizes)}, the "
            f"update_scatter_dims) and the window dimensions update_window_dims={spec_attr(a['update_window_dims'])}.",
            "each window dimension runs over an operand dimension not in inserted_window_dims "
            f"{spec_attr(a['inserted_window_dims'])} (nor input_batching_dims): {spec_attr(window_operand)}, "
            f"sizes at most {spec_attr([odims[d] for d in window_operand])}.",
            f"The exercise's updates is {Shape.of(call.value('updates'))}.",
        ]

    def values_steps(self, call, result, k=None):
        imap = call.index_map()
        accesses = list(imap)
        targets = sorted({tuple(a.writes[0][1]) for a in accesses if a.writes})
        lines = [self.formula, "The result starts as a copy of operand; then, in XLA's order:"]
        for t in targets[:6]:
            lines += self._scatter_value_steps(call, imap, t, result[t])
        skipped = [a.index for a in accesses if a.skipped]
        if skipped:
            lines.append("skipped (their windows do not fit in the operand): "
                         + ", ".join(f"updates{index_text(u)}" for u in skipped[:6])
                         + (" ..." if len(skipped) > 6 else ""))
        return lines + [f"result = {spec_literal(result, 9)}"]

    def read_question(self, call, index):
        return (f"Into which element of the result is updates{index_text(index)} combined?\n"
                "Answer with its index, e.g. (1, 2), or \"skipped\" if XLA skips it.")


register(GatherExercises())
register(ScatterExercises())


# -- indexing stories: dimension numbers for an indexing described in NumPy ------------------------

_GATHER_DIMS = ("offset_dims", "collapsed_slice_dims", "start_index_map", "operand_batching_dims",
                "start_indices_batching_dims", "index_vector_dim", "slice_sizes")
_SCATTER_DIMS = ("update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims",
                 "input_batching_dims", "scatter_indices_batching_dims", "index_vector_dim")


def _story_call(opcode, operands, attrs, hidden, optional, title, numpy_code, numpy_result, args, extra=()):
    call = Call(opcode, operands, attrs, [("operand", n) for n, _ in operands] + list(extra)
                + [("attr", k) for k in hidden], args=args)
    call.hidden, call.optional, call.story = tuple(hidden), dict(optional), (title, numpy_code)
    got = call.run()
    if not np.array_equal(got, numpy_result):  # the story and the op must agree, or the exercise is wrong
        raise AssertionError(f"{opcode} story {title!r}: the op gives {got}, NumPy {numpy_result}")
    return call


def _gather_indexing(self, rng, level, kind):
    story = ["embedding", "gather_nd", "take_along_axis"][level - 1]
    base = {"indices_are_sorted": False}
    if story == "embedding":
        v, d, n = ints(rng, 4, 5), ints(rng, 2, 3), ints(rng, 2, 3)
        table = distinct(rng, [v, d], 2)
        ids = rng.integers(0, v, size=n).astype(np.int32)
        attrs = dict(base, offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,), operand_batching_dims=(),
                     start_indices_batching_dims=(), index_vector_dim=1, slice_sizes=(1, d))
        return _story_call("gather", [("table", table), ("ids", ids)], attrs, _GATHER_DIMS,
                           {"operand_batching_dims": (), "start_indices_batching_dims": ()},
                           "An embedding lookup: row ids[n] of the table, for each n", "result = table[ids]",
                           table[ids], {"table": "operand", "ids": "start_indices"})
    if story == "gather_nd":
        a, b, n = ints(rng, 3, 4), ints(rng, 3, 5), ints(rng, 2, 4)
        operand = distinct(rng, [a, b], 2)
        idx = np.stack([rng.integers(0, a, size=n), rng.integers(0, b, size=n)], axis=1).astype(np.int32)
        attrs = dict(base, offset_dims=(), collapsed_slice_dims=(0, 1), start_index_map=(0, 1), operand_batching_dims=(),
                     start_indices_batching_dims=(), index_vector_dim=1, slice_sizes=(1, 1))
        return _story_call("gather", [("operand", operand), ("idx", idx)], attrs, _GATHER_DIMS,
                           {"operand_batching_dims": (), "start_indices_batching_dims": ()},
                           "gather_nd: one element per row of idx, idx[n] = (row, column)",
                           "result = operand[idx[:, 0], idx[:, 1]]", operand[idx[:, 0], idx[:, 1]],
                           {"idx": "start_indices"})
    bsz, m, k = ints(rng, 2, 3), ints(rng, 3, 5), ints(rng, 2, 3)
    operand = distinct(rng, [bsz, m], 2)
    idx = rng.integers(0, m, size=(bsz, k)).astype(np.int32)
    attrs = dict(base, offset_dims=(), collapsed_slice_dims=(1,), start_index_map=(1,), operand_batching_dims=(0,),
                 start_indices_batching_dims=(0,), index_vector_dim=2, slice_sizes=(1, 1))
    return _story_call("gather", [("operand", operand), ("idx", idx)], attrs, _GATHER_DIMS, {},
                       "take_along_axis: in each row b, the elements at columns idx[b, :]",
                       "result = np.take_along_axis(operand, idx, axis=1)", np.take_along_axis(operand, idx, axis=1),
                       {"idx": "start_indices"})


def _scatter_indexing(self, rng, level, kind):
    story = ["segment_sum", "segment_sum_rows", "one_hot"][level - 1]
    base = {"indices_are_sorted": False, "unique_indices": False}
    if story.startswith("segment_sum"):
        s, n = ints(rng, 3, 4), ints(rng, 4, 5)
        ids = rng.integers(0, s, size=n).astype(np.int32)
        ids[-1] = ids[0]  # two rows of one segment: they add up
        rows = story == "segment_sum_rows"
        d = ints(rng, 2, 3) if rows else None
        data = (10 * np.arange(1, n * (d or 1) + 1)).reshape((n, d) if rows else (n,)).astype(np.int32)
        zeros = np.zeros((s, d) if rows else (s,), np.int32)
        want = zeros.copy()
        np.add.at(want, ids, data)
        attrs = dict(base, update_window_dims=(1,) if rows else (), inserted_window_dims=(0,),
                     scatter_dims_to_operand_dims=(0,), input_batching_dims=(), scatter_indices_batching_dims=(),
                     index_vector_dim=1, update_computation=computation("add", "add"))
        return _story_call("scatter", [("zeros", zeros), ("segment_ids", ids), ("data", data)], attrs, _SCATTER_DIMS,
                           {"input_batching_dims": (), "scatter_indices_batching_dims": ()},
                           "A segment sum: row n of data is added into row segment_ids[n] of the result",
                           f"result = np.zeros({zeros.shape}, np.int32)\nnp.add.at(result, segment_ids, data)", want,
                           {"zeros": "operand", "segment_ids": "scatter_indices", "data": "updates"},
                           [("attr", "update_computation")])
    n, c = ints(rng, 3, 4), ints(rng, 3, 4)
    labels = rng.integers(0, c, size=n).astype(np.int32)
    zeros, ones = np.zeros((n, c), np.int32), np.ones(n, np.int32)
    want = zeros.copy()
    want[np.arange(n), labels] = 1
    attrs = dict(base, update_window_dims=(), inserted_window_dims=(1,), scatter_dims_to_operand_dims=(1,),
                 input_batching_dims=(0,), scatter_indices_batching_dims=(0,), index_vector_dim=1,
                 update_computation=computation("add", "add"))
    return _story_call("scatter", [("zeros", zeros), ("labels", labels), ("ones", ones)], attrs, _SCATTER_DIMS, {},
                       "A one-hot encoding: in row n, a 1 at column labels[n]",
                       f"result = np.zeros(({n}, {c}), np.int32)\nresult[np.arange({n}), labels] = 1", want,
                       {"zeros": "operand", "labels": "scatter_indices", "ones": "updates"},
                       [("attr", "update_computation")])


GatherExercises.indexing_problem = _gather_indexing
ScatterExercises.indexing_problem = _scatter_indexing
GatherExercises.kinds = GatherExercises.kinds + ("indexing",)
ScatterExercises.kinds = ScatterExercises.kinds + ("indexing",)
