"""Index maps of collectives whose operands differ in shape, of collectives in replicated
(pmap-style) modules given one device's arguments, and Scatter's running values at any
step (no replay from the start)."""
import numpy as np
import pytest

import xla_explorer as xe
from xla_explorer.animate.model import fmt_value
from xla_explorer.inspect import instruction_operands

f32, s32 = np.float32, np.int32


# -- collectives -----------------------------------------------------------------------------

def variadic_all_reduce():
    b = xe.XlaBuilder("variadic")
    x = xe.Parameter(b, 0, "f32[4]", "x")
    y = xe.Parameter(b, 1, "f32[2,3]", "y")
    rid = xe.ConvertElementType(xe.ReplicaId(b), "f32")  # each replica's values differ
    ar = xe.AllReduce([xe.Add(x, rid), xe.Mul(y, xe.Add(rid, f32(1)))], xe.Add, replica_groups=[[0, 1, 2]])
    return b.build(ar), ar


def test_variadic_all_reduce_of_different_shapes_maps_each_result_on_its_own():
    comp, ar = variadic_all_reduce()
    x, y = np.arange(4, dtype=f32), np.arange(6, dtype=f32).reshape(2, 3)
    # a replicated module given one device's arguments: it runs on the 3 devices its groups name
    imap = xe.index_map(comp, ar.name, x, y)
    assert imap.domain_shape == (3, 4 + 6)
    assert imap.result_layout == ((0, (4,), 0), (1, (2, 3), 4))
    iv = instruction_operands(comp, ar.name, x, y)
    operands, results = iv.operands, iv.result
    assert [np.shape(o) for o in operands] == [(3, 4), (3, 2, 3)]
    for d, k in [(0, 0), (2, 3), (1, 4), (2, 9), (0, 7)]:
        a = imap[(d, k)]
        j, i = a.detail["result"], a.detail["result_index"]
        assert a.writes == ((j, (d,) + i),) and {r[0] for r in a.reads} == {j}
        assert [src[0] for _, src in a.reads] == [0, 1, 2]      # every device of the group, in order
        total = sum(operands[j][src] for _, src in a.reads)
        assert results[j][(d,) + i] == total                     # what the reference computed
    # device 1 adds 1 to x (its replica id) and scales y by 2: the values are per device
    assert operands[0][1].tolist() == [1, 2, 3, 4] and operands[1][2].tolist() == [[0, 3, 6], [9, 12, 15]]
    with pytest.raises(IndexError, match="outside"):
        imap[(0, 10)]


def test_variadic_collective_animation_and_view_step_through_the_flattened_results():
    comp, ar = variadic_all_reduce()
    x, y = np.arange(4, dtype=f32), np.arange(6, dtype=f32).reshape(2, 3)
    anim = xe.animate(comp, ar.name, x, y, max_steps=5)
    assert [g.name for g in anim.grids][-1] == "results" and anim.domain == "results"
    frame = anim.frame_at((1, 5))        # result[1]@1[0, 1]
    assert frame.indices("operands[1]", "read") == {(0, 0, 1), (1, 0, 1), (2, 0, 1)}
    assert frame.indices("result[1]", "write") == {(1, 0, 1)} and frame.indices("results", "current") == {(1, 5)}
    assert "result[1]@1[0, 1] = operands[1]@0[0, 1] + operands[1]@1[0, 1] + operands[1]@2[0, 1]" in frame.text
    assert frame.text.splitlines()[-2].endswith("= 1 + 2 + 3 = 6")
    v = xe.index_map_view(comp, ar.name, x, y, widget=False).select((2, 2))
    assert v.highlighted["operands[0]"] == {(0, 2): "read", (1, 2): "read", (2, 2): "read"}


def test_all_gather_of_different_shapes_from_one_devices_arguments_and_per_device_traces():
    b = xe.XlaBuilder("gather2")
    x = xe.Parameter(b, 0, "f32[2]", "x")
    y = xe.Parameter(b, 1, "s32[1,3]", "y")
    ag = xe.AllGather([xe.Neg(x), y], all_gather_dim=0, replica_groups=[[1, 0]])
    comp = b.build(ag)
    args = [np.array([1, 2], f32), np.array([[7, 8, 9]], s32)]
    imap = xe.index_map(comp, ag.name, *args)
    assert imap.domain_shape == (2, 4 + 6)
    a = imap[(0, 4 + 3 + 1)]    # result[1]@0[1, 1]: block 1 of group [1, 0] comes from device 0
    assert a.reads == ((1, (0, 0, 1)),) and a.writes == ((1, (0, 1, 1)),)
    # per-device arguments: trace the module replicated and pass the trace
    t = comp.trace_replicated([[args[0], args[1]], [args[0] * 10, args[1] * 10]])
    per = instruction_operands(comp, ag.name, trace=t)
    m = xe.index_map(comp, ag.name, trace=t)
    k, src = m[(1, 1)].reads[0]     # result[0]@1[1]: from device 1 (block 0 of group [1, 0])
    assert (k, src) == (0, (1, 1)) and per.operands[0][src] == -20 and per.result[0][1, 1] == -20


# -- Scatter's running values at any step ----------------------------------------------------

def histogram(n, bins=8, seed=0):
    rng = np.random.default_rng(seed)
    operand = np.zeros(bins, f32)
    indices = rng.integers(0, bins, (n, 1)).astype(s32)
    updates = rng.integers(1, 4, n).astype(f32) / 4
    attrs = dict(update_window_dims=[], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
                 index_vector_dim=1)
    return operand, indices, updates, attrs


def prefix(operand, indices, updates, attrs, step, combiner=xe.Add):
    """The reference's result once updates 0 .. step are applied."""
    return xe.Scatter(operand, indices[:step + 1], updates[:step + 1], combiner, **attrs)


def test_scatter_shows_running_values_far_beyond_twenty_thousand_steps():
    operand, indices, updates, attrs = histogram(30_000)
    v = xe.index_map_view("scatter", operand, indices, updates, update_computation=xe.Add, widget=False, **attrs)
    step = 27_345
    v.select((step,))
    frame = v.frame
    np.testing.assert_array_equal(frame.values["result"], prefix(operand, indices, updates, attrs, step))
    target = int(indices[step, 0])
    before = prefix(operand, indices, updates, attrs, step - 1)[target]
    after = frame.values["result"][target]
    assert f"result[{target}] = result[{target}] + updates[{step}]" in v.formula
    assert f"= {fmt_value(before)} + {fmt_value(updates[step])} = {fmt_value(after)}" in v.formula
    assert before != after and fmt_value(before) != fmt_value(after)   # six digits: the step shows
    first = int(np.flatnonzero(indices[:, 0] == target)[0])
    assert f"already updated at step {first + 1} (update [{first}])" in v.formula
    assert frame.indices("result", "collision") == {(target,)}
    # the first write of an element is no collision
    v.select((first,))
    assert v.frame.indices("result", "write") == {(target,)} and "COLLISION" not in v.formula


def test_scatter_with_a_combiner_that_is_not_elementwise_runs_one_step_at_a_time():
    operand, indices, updates, attrs = histogram(300, bins=5, seed=1)

    def first_then_sum(a, b):   # a reshape: not element-wise, so applied one update at a time
        return xe.Reshape(xe.Add(xe.Reshape(a, [1]), xe.Reshape(b, [1])), [])

    anim = xe.animate("scatter", operand, indices, updates, update_computation=first_then_sum, max_steps=4,
                      **attrs)
    assert not anim.context.attrs["update_computation"].is_elementwise
    for frame in anim.frames:
        np.testing.assert_array_equal(frame.values["result"],
                                      prefix(operand, indices, updates, attrs, frame.step, first_then_sum))
    assert anim.frames[-1].step == 299


def test_select_and_scatter_running_values_match_the_reference_at_a_late_step():
    rng = np.random.default_rng(3)
    operand = rng.standard_normal((4, 300)).astype(f32)
    source = rng.standard_normal((2, 299)).astype(f32)
    window = dict(window_dimensions=[3, 2], window_strides=[1, 1], padding=[(0, 0), (0, 0)])
    # select= is the op's attribute (the view's first selection is selected=)
    v = xe.index_map_view("select-and-scatter", operand, source, f32(0), select=xe.Ge, scatter=xe.Add,
                          widget=False, selected=(1, 250), **window)
    assert v.selected == (1, 250)
    step = 299 + 250

    def partial(upto):   # the reference on the source elements up to ``upto`` only (the later ones add zeros)
        keep = np.zeros_like(source)
        keep.reshape(-1)[:upto + 1] = source.reshape(-1)[:upto + 1]
        return xe.SelectAndScatter(operand, xe.Ge, source=keep, init_value=f32(0), scatter=xe.Add, **window)

    rw = v.animation.context._running_writes["rw"]
    after, before = partial(step), partial(step - 1)
    np.testing.assert_array_equal(rw.values_after(step)[0], after)
    target = v.frame.access.detail["selected"]
    assert f"= {fmt_value(before[target])} + {fmt_value(source[1, 250])} = {fmt_value(after[target])}" in v.formula
