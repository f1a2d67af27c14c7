"""Index-map animators: the frames' data (which cells of which grid each step highlights)
checked against the ops' index maps; rendering (GIF, HTML, frames, stepper) on few steps."""
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

os.environ.setdefault("MPLBACKEND", "Agg")

import xla_explorer as xe  # noqa: E402
from xla_explorer.ops import registry  # noqa: E402

A = pytest.importorskip("xla_explorer.animate")
f32, s32 = np.float32, np.int32
from conftest import CORPUS  # noqa: E402


def add(a, b):
    return xe.Add(a, b)


# -- the generic check: frames against the index map ---------------------------------------------

READ_ROLES = ("read", "selected")


def check_frames(anim):
    """Every frame highlights exactly what the index map says: the domain element, the
    elements read (per operand grid) and the elements written (per result grid)."""
    ctx, imap = anim.context, anim.index_map
    animator = registry.LAYERS["animation"][anim.opcode]
    results = animator.result_names(ctx)
    for frame in anim.frames:
        access = imap[frame.index]
        assert frame.access == access
        domain = anim.grid(anim.domain)
        assert frame.positions(anim.domain, "current", "skipped") == {domain.position(frame.index)}
        assert ("skipped" in frame.roles(anim.domain)) == access.skipped
        expected = {}
        for k, index in access.reads:
            name, to_grid = animator.operand_grid(ctx, k)
            expected.setdefault(name, set()).add(to_grid(index) if to_grid else tuple(index))
        for name, indices in expected.items():
            roles = READ_ROLES + (("current", "skipped") if name == anim.domain else ())
            assert frame.indices(name, *roles) == indices, (frame.number, name)
        for g in anim.grids:  # no element is marked read that the map does not read
            if g.name not in expected:
                assert not frame.positions(g.name, *READ_ROLES), (frame.number, g.name)
        written = {}
        for j, index in A.model.writes(access):
            written.setdefault(results[j], set()).add(index)
        for name in results:
            assert frame.indices(name, "write", "collision") == written.get(name, set())


def animate(*args, **kw):
    anim = xe.animate(*args, **kw)
    check_frames(anim)
    return anim


# -- Gather ----------------------------------------------------------------------------------------

def gather_windows():
    operand = np.arange(42, dtype=f32).reshape(6, 7)
    starts = np.array([[0, 0], [5, 6], [2, 3], [-1, 2], [4, 1]], s32)
    return animate("gather", operand, starts, offset_dims=[1, 2], collapsed_slice_dims=[], start_index_map=[0, 1],
                   index_vector_dim=1, slice_sizes=[2, 3])


def test_gather_window_at_its_clamped_start():
    anim = gather_windows()
    assert len(anim.frames) == 30 and anim.summary == "30 steps"
    clamped = [f for f in anim.frames if f.access.clamped]
    assert {f.index[0] for f in clamped} == {1, 3}  # starts [5, 6] and [-1, 2] are clamped
    for f in anim.frames:
        d = f.access.detail
        role = "clamped" if f.access.clamped else "window"
        window = {(d["full_start_index"][0] + i, d["full_start_index"][1] + j) for i in range(2) for j in range(3)}
        # the window's cells, the read one among them marked "read"
        assert f.indices("operand", role, "read") == window
        assert f.indices("start_indices", "index") == set(d["start_indices_index"])
    f = anim.frames[7]  # result [1, 0, 1]: start [5, 6] clamped to [4, 4]
    assert f.index == (1, 0, 1) and f.indices("operand", "read") == {(4, 5)}
    assert "clamp([5, 6], 0," in f.text and "= [4, 4]   <- clamped" in f.text
    assert "result[1, 0, 1] = operand[4, 5] = 33" in f.text


def test_gather_of_a_parsed_program_and_without_args():
    path = CORPUS / "gather_windows_2d_oob" / "module.hlo"
    if not path.exists():
        pytest.skip("corpus not found")
    comp = xe.parse_hlo(path.read_text())
    operand = np.arange(42, dtype=f32).reshape(6, 7)
    starts = np.array([[0, 0], [5, 6], [2, 3], [-1, 2], [4, 1]], s32)
    anim = xe.animate(comp, "gather.1", operand, starts)
    check_frames(anim)
    assert anim.title == "Gather gather.1"
    assert [f.cells for f in anim.frames] == [f.cells for f in gather_windows().frames]
    # no arguments: shapes only; the picture says the indices are unknown, never zeros
    unknown = xe.animate(comp, "gather.1")
    assert not unknown.known and all(f.access.unknown for f in unknown.frames)
    f = unknown.frames[7]
    assert "read" not in f.roles("operand") and "candidate" in f.roles("operand")
    assert "unknown" in f.text and "start_index      = start_indices[1, :] = ?" in f.text
    assert any("Index values unknown" in t.text for t in A.scene.layout(unknown, f).texts)
    with pytest.raises(KeyError, match="gather.1"):
        xe.animate(comp, "nope.1")


def _shapes_only_module(opcode):
    b = xe.XlaBuilder(opcode)
    x = xe.Parameter(b, 0, xe.Shape("f32", (6, 8)), "x")
    i = xe.Parameter(b, 1, xe.Shape("s32", ()), "i")
    if opcode == "scatter":
        idx = xe.Parameter(b, 2, xe.Shape("s32", (3, 1)), "idx")
        u = xe.Parameter(b, 3, xe.Shape("f32", (3, 8)), "u")
        return b.build(xe.Scatter(x, idx, u, add, update_window_dims=[1], inserted_window_dims=[0],
                                  scatter_dims_to_operand_dims=[0], index_vector_dim=1))
    if opcode == "dynamic-slice":
        return b.build(xe.DynamicSlice(x, [i, s32(2)], [2, 3]))
    return b.build(xe.DynamicUpdateSlice(x, xe.Broadcast(f32(1), [2, 3]), [i, s32(2)]))


@pytest.mark.parametrize("opcode, domain, grid", [("scatter", "updates", "result"),
                                                  ("dynamic-slice", "result", "operand"),
                                                  ("dynamic-update-slice", "result", "update")])
def test_shapes_only_animations_of_value_dependent_windows(opcode, domain, grid):
    """No arguments: where the window goes depends on unknown index values; the frames mark
    the candidates (no window drawn at a made-up start) and say the values are unknown."""
    comp = _shapes_only_module(opcode)
    anim = xe.animate(comp, comp.entry.root.name, max_steps=4)
    assert not anim.known and anim.domain == domain
    for f in anim.frames:
        assert f.access.unknown and "unknown" in f.text
        assert not {"window", "clamped"} & set(f.roles(grid))
        scene = A.draw.scene_of(anim, f.number)
        assert min(scene.fonts()) >= 10 and any("Index values unknown" in t.text for t in scene.texts)
    assert "candidate" in {role for _, role in anim.frames[2].regions.get(grid, ())}
    # the start that a constant fixes (column 2) narrows the candidates to what it allows
    assert {"scatter": "it writes one of 6 elements: result[0:6, 2]",
            "dynamic-slice": "it reads one of 5 elements: operand[0:5, 4]",
            "dynamic-update-slice": "it reads one of 2 elements: operand[0, 2] or update[0, 0]"}[opcode] \
        in anim.frames[2].text
    if opcode == "dynamic-update-slice":   # column 0 is left of the update, wherever its rows go
        f = anim.frames[0]
        assert f.index == (0, 0) and "it reads operand[0, 0] (whatever the index values)" in f.text
        assert f.indices("operand", "candidate") == {(0, 0)} and not f.regions.get("update")
    view = xe.index_map_view(comp, comp.entry.root.name, widget=False)
    view.select(tuple(n - 1 for n in view.animation.index_map.domain_shape))
    assert "Index values unknown" in view.html() and "unknown" in view.formula
    if opcode != "scatter":   # whatever the unknown start, what is read is among the candidates
        shapes_only = xe.index_map(comp, comp.entry.root.name)
        x = np.arange(48, dtype=f32).reshape(6, 8)
        for start in (-3, 0, 1, 4, 9):
            known = xe.index_map(comp, comp.entry.root.name, x, s32(start))
            assert all(set(a.reads) <= set(shapes_only[a.index].reads) for a in known)


def test_gather_rows_with_batching_dims():
    operand = np.arange(24, dtype=f32).reshape(2, 3, 4)
    indices = np.array([[2], [7]], s32)  # one start per batch; 7 clamps to 3
    anim = animate("gather", operand, indices, offset_dims=[1], collapsed_slice_dims=[1], start_index_map=[1],
                   index_vector_dim=1, slice_sizes=[1, 1, 4], operand_batching_dims=[0],
                   start_indices_batching_dims=[0])
    f = anim.frames[5]  # result [1, 1]: batch 1, row clamped to 2
    assert f.access.clamped and f.indices("operand", "read") == {(1, 2, 1)}
    assert f.indices("operand", "clamped", "read") == {(1, 2, j) for j in range(4)}
    assert "full_batching_index" in f.text


# -- Scatter ---------------------------------------------------------------------------------------

def scatter_dups(update_window_last=True):
    inputs = np.arange(18, dtype=f32).reshape(6, 3)
    indices = np.array([[0], [2], [2], [9], [-1], [5], [-9]], s32)
    updates = np.arange(1, 22, dtype=f32).reshape(7, 3)
    return inputs, indices, updates, animate(
        "scatter", inputs, indices, updates, update_window_dims=[1], inserted_window_dims=[0],
        scatter_dims_to_operand_dims=[0], index_vector_dim=1, update_computation=add)


def test_scatter_steps_in_xla_order_with_collisions_and_skips():
    inputs, indices, updates, anim = scatter_dups()
    assert anim.domain == "updates" and len(anim.frames) == 21
    seen = set()
    for k, f in enumerate(anim.frames):
        assert f.step == k and f.access.detail["schedule_position"] == k
        target = tuple(f.access.detail["result_index"])
        if f.access.skipped:
            assert f.roles("updates") == {"skipped"} and not f.positions("result", "write", "collision")
            assert "SKIPPED" in f.text
        elif target in seen:
            assert f.indices("result", "collision") == {target} and "COLLISION" in f.text
        else:
            assert f.indices("result", "write") == {target}
        if not f.access.skipped:
            seen.add(target)
        assert f.indices("scatter_indices", "index") == {(f.index[0], 0)}
    assert [f.index[0] for f in anim.frames if f.access.skipped] == [3, 3, 3, 4, 4, 4, 6, 6, 6]
    assert sum("collision" in f.roles("result") for f in anim.frames) == 3  # rows 1 and 2 hit row 2
    # the running values end at the reference's result, and show each combination
    final = anim.frames[-1].values["result"]
    np.testing.assert_array_equal(final, xe.Scatter(inputs, indices, updates, update_window_dims=[1],
                                                    inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
                                                    index_vector_dim=1, update_computation=add))
    f = anim.frames[6]  # update [2, 0] lands on result [2, 0] after update [1, 0]
    assert "= 10 + 7 = 17" in f.text and "already updated at step 4" in f.text


def test_scatter_window_partly_out_of_bounds_is_skipped_whole():
    inputs = np.zeros((4, 4), f32)
    indices = np.array([[3, 1], [1, 1]], s32)  # a 2x2 window at [3, 1] does not fit
    updates = np.ones((2, 2, 2), f32)
    anim = animate("scatter", inputs, indices, updates, update_window_dims=[1, 2], inserted_window_dims=[],
                   scatter_dims_to_operand_dims=[0, 1], index_vector_dim=1, update_computation=add)
    first = anim.frames[:4]
    assert all(f.access.skipped for f in first)
    # the part of the window inside the operand is shown as skipped, nothing is written
    assert first[0].indices("result", "skipped") == {(3, 1), (3, 2)}
    assert not any(f.access.skipped for f in anim.frames[4:])


def test_scatter_replace_and_order_of_window_dims():
    inputs = np.zeros((3, 4), f32)
    indices = np.array([1, 1], s32)
    updates = np.array([[1, 2], [3, 4], [5, 6], [7, 8]], f32)  # window dim first: [4, 2], scatter dim 1
    anim = animate("scatter", inputs, indices, updates, update_window_dims=[0], inserted_window_dims=[0],
                   scatter_dims_to_operand_dims=[0], index_vector_dim=1, update_computation=lambda a, b: b)
    # XLA's order: scatter index first (dimension 1), then the window (dimension 0)
    assert [f.index for f in anim.frames] == [(w, s) for s in range(2) for w in range(4)]
    assert [f.step for f in anim.frames] == list(range(8))
    assert sum("collision" in f.roles("result") for f in anim.frames) == 4
    assert "result[1, 0] = updates[0, 1] = 2" in anim.frames[4].text


# -- ReduceWindow, SelectAndScatter, Reduce -----------------------------------------------------------

def test_reduce_window_padding_and_dilation_holes():
    operand = np.arange(12, dtype=f32).reshape(3, 4)
    anim = animate("reduce-window", operand, f32(0), computation=add, window_dimensions=[2, 2],
                   window_strides=[2, 1], padding=[(1, 1), (0, 1)], base_dilations=[2, 1], window_dilations=[1, 2])
    grid = anim.grid("operand")
    assert grid.shape == (7, 5)  # 1 + (3-1)*2+1 + 1 rows, 4 + 1 columns
    assert grid.position((1, 2)) == (3, 2) and grid.index_of((2, 0)) is None
    static = grid.static_roles()
    assert static["hole"] == 8 and static["padding"] == 15
    kinds = {"operand": "read", "padding": "padding", "hole": "hole"}
    for f in anim.frames:
        cells = f.access.detail["cells"]
        expected = {(tuple(p + o for p, o in zip(padded, grid.origin)), kinds[kind]) for _, padded, kind, _ in cells}
        assert set(f.cells["operand"].items()) == expected
        assert f.positions("init_value", "init") == {()}
    f = anim.frames[3]  # result [1, 0]: two holes, elements [1, 0] and [1, 2]
    assert f.indices("operand", "read") == {(1, 0), (1, 2)} and len(f.positions("operand", "hole")) == 2
    assert "= 0 + 4 + 6 = 10" in f.text
    assert sum(bool(f.positions("operand", "padding")) for f in anim.frames) > 0


def test_reduce_window_negative_padding_crops():
    operand = np.arange(6, dtype=f32)
    anim = animate("reduce-window", operand, f32(0), computation=add, window_dimensions=[2], window_strides=[1],
                   padding=[(-1, 1)])
    grid = anim.grid("operand")
    assert grid.static_roles() == {"cropped": 1, "padding": 1}
    assert anim.frames[0].indices("operand", "read") == {(1,), (2,)}


def test_select_and_scatter_selected_and_collisions():
    operand = np.array([[1, 5, 2, 0], [3, 4, 9, 1], [0, 2, 2, 7]], f32)
    source = np.array([[1, 2], [3, 4]], f32)
    kw = dict(select=lambda a, b: xe.Ge(a, b), scatter=add, window_dimensions=[2, 3], window_strides=[1, 1],
              padding=[(0, 0), (0, 0)])
    anim = animate("select-and-scatter", operand, source, f32(0), **kw)
    assert anim.domain == "source" and len(anim.frames) == 4
    assert [f.indices("operand", "selected") for f in anim.frames] == [{(1, 2)}] * 4
    assert [f.roles("result") for f in anim.frames] == [{"write"}] + [{"collision"}] * 3
    np.testing.assert_array_equal(anim.frames[-1].values["result"],
                                  xe.SelectAndScatter(operand, source=source, init_value=f32(0), **kw))


def test_select_and_scatter_window_of_padding_only():
    operand = np.array([[1, 2]], f32)
    anim = animate("select-and-scatter", operand, np.ones((1, 3), f32), f32(0), select=lambda a, b: xe.Ge(a, b),
                   scatter=add, window_dimensions=[1, 1], window_strides=[1, 1], padding=[(0, 0), (0, 1)])
    last = anim.frames[-1]
    assert last.access.skipped and last.roles("source") == {"skipped"} and "only padding" in last.text
    assert last.positions("operand", "padding") == {(0, 2)}


def test_reduce_reads_a_row():
    operand = np.arange(20, dtype=f32).reshape(4, 5)
    anim = animate("reduce", operand, f32(0), computation=lambda a, b: xe.Max(a, b), dimensions=[1])
    assert anim.frames[3].indices("operand", "read") == {(3, j) for j in range(5)}
    assert "= max(0, 15, 16, 17, 18, 19) = 19" in anim.frames[3].text


# -- Pad and the slicing ops ------------------------------------------------------------------------

def test_pad_interior_and_negative_padding():
    operand = np.arange(6, dtype=f32).reshape(2, 3)
    anim = animate("pad", operand, f32(-1), padding_config=[(1, -1, 1), (-1, 2, 0)])
    result, grid = anim.grid("result"), anim.grid("operand")
    padding = {f.index for f in anim.frames if not f.access.reads}
    assert {tuple(p) for p in zip(*np.nonzero(result.static))} == padding
    read = {i for f in anim.frames for _, i in f.access.reads}
    assert {tuple(p) for p in zip(*np.nonzero(grid.static))} == {(i, j) for i in range(2) for j in range(3)} - read
    for f in anim.frames:
        assert f.positions("padding_value", "padding") == ({()} if f.index in padding else set())
    f = anim.frames[4]  # result [1, 0] = operand [0, 1]; [2, 0] is interior padding
    assert f.indices("operand", "read") == {(0, 1)} and "([1, 0] - [1, -1]) / [2, 1] = [0, 1]" in f.text
    assert "interior padding" in anim.frames[8].text and "= [1/2, 1]" in anim.frames[8].text


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(-2, 3), st.integers(-2, 3), st.integers(0, 2)), min_size=1, max_size=2),
       st.integers(1, 3))
def test_pad_frames_match_the_map(config, n):
    operand = np.arange(n ** len(config), dtype=f32).reshape((n,) * len(config))
    try:
        anim = xe.animate("pad", operand, f32(0), padding_config=config)
    except xe.ShapeError:
        return
    check_frames(anim)
    for f in anim.frames:
        assert bool(f.positions("padding_value", "padding")) == (not f.access.reads)


def test_dynamic_slice_clamped_window():
    operand = np.arange(20, dtype=f32).reshape(4, 5)
    anim = animate("dynamic-slice", operand, s32(3), s32(-1), slice_sizes=[2, 3])
    assert anim.grid("start_indices").value.tolist() == [3, -1]
    for f in anim.frames:
        assert f.access.clamped
        assert f.indices("operand", "clamped", "read") == {(i, j) for i in (2, 3) for j in range(3)}
        assert f.indices("start_indices", "index") == {(0,), (1,)}
    assert "= [2, 0]   <- clamped" in anim.frames[0].text


@settings(max_examples=20, deadline=None)
@given(st.integers(-3, 6), st.integers(-3, 6))
def test_dynamic_slice_window_at_adjusted_start(i, j):
    anim = animate("dynamic-slice", np.zeros((4, 5), f32), s32(i), s32(j), slice_sizes=[2, 2])
    a, b = min(max(i, 0), 2), min(max(j, 0), 3)
    role = "clamped" if (a, b) != (i, j) else "window"
    assert anim.frames[0].indices("operand", role, "read") == {(a + x, b + y) for x in range(2) for y in range(2)}


def test_dynamic_update_slice_from_update_or_operand():
    operand = np.arange(20, dtype=f32).reshape(4, 5)
    anim = animate("dynamic-update-slice", operand, np.ones((2, 2), f32), s32(5), s32(1))
    for f in anim.frames:
        inside = 2 <= f.index[0] < 4 and 1 <= f.index[1] < 3
        assert bool(f.positions("update", "read")) == inside
        assert f.indices("result", "clamped") == {(2, 1), (2, 2), (3, 1), (3, 2)} - {f.index}
    assert "outside the update" in anim.frames[0].text


def test_slice_marks_its_selection():
    operand = np.arange(20, dtype=f32).reshape(4, 5)
    anim = animate("slice", operand, start_indices=[1, 0], limit_indices=[4, 5], strides=[2, 2])
    grid = anim.grid("operand")
    assert {tuple(p) for p in zip(*np.nonzero(grid.static))} == {(i, j) for i in (1, 3) for j in (0, 2, 4)}
    assert "[1, 0] + [1, 0] * [2, 2] = [3, 0]" in anim.frames[3].text


# -- the shape ops, Conv, Dot --------------------------------------------------------------------------

@pytest.mark.parametrize("opcode, args, kw", [
    ("transpose", (np.arange(6, dtype=f32).reshape(2, 3),), dict(permutation=[1, 0])),
    ("BroadcastInDim", (np.arange(3, dtype=f32),), dict(out_dim_size=[2, 3], broadcast_dimensions=[1])),
    ("reverse", (np.arange(6, dtype=f32).reshape(2, 3),), dict(dimensions=[0, 1])),
    ("concatenate", (np.zeros((1, 3), f32), np.ones((2, 3), f32)), dict(dimension=0)),
    ("reshape", (np.arange(6, dtype=f32).reshape(2, 3),), dict(new_sizes=[3, 2])),
    ("dot", (np.ones((2, 3), f32), np.ones((3, 2), f32)),
     dict(lhs_contracting_dimensions=[1], rhs_contracting_dimensions=[0])),
])
def test_copy_and_sum_ops(opcode, args, kw):
    anim = animate(opcode, *args, **kw)
    assert len(anim.frames) == len(anim.index_map)
    assert all(f.text.startswith("result_index") for f in anim.frames)


def test_concatenate_reads_the_right_operand():
    anim = animate("concatenate", np.zeros((1, 3), f32), np.ones((2, 3), f32), dimension=0)
    assert anim.frames[4].indices("operands[1]", "read") == {(0, 1)}
    assert "falls in operands[1]" in anim.frames[4].text


def test_convolution_2d_default_view_shows_every_read():
    lhs = np.arange(2 * 5 * 5 * 3, dtype=f32).reshape(2, 5, 5, 3)
    rhs = np.ones((3, 3, 3, 4), f32)
    anim = animate("convolution", lhs, rhs, window_strides=[1, 1], padding=[(1, 1), (1, 1)],
                   dimension_numbers=("NHWC", "HWIO", "NHWC"))
    result, lhs_grid = anim.grid("result"), anim.grid("lhs")
    assert result.dims == (1, 2) and result.fixed == {0: 0, 3: 0}
    assert lhs_grid.dims == (3, 1, 2) and lhs_grid.fixed == {0: 0}
    assert len(anim.frames) == 25 and "in result[0, :, :, 0]" in anim.summary
    assert all(f.index[0] == 0 and f.index[3] == 0 for f in anim.frames)
    for f in anim.frames:  # every highlighted cell is drawn
        for name in ("lhs", "rhs"):
            assert all(anim.grid(name).rc(p) is not None for p in f.positions(name))
    corner = anim.frames[0]  # result [0, 0, 0, 0]: a 2x2 part of the window inside, 3 features
    assert len(corner.access.detail["pairs"]) == 12 and "sum of 12 products" in corner.text


def test_views_for_high_ranks():
    operand = np.arange(2 * 3 * 4 * 5, dtype=f32).reshape(2, 3, 4, 5)
    anim = xe.animate("transpose", operand, permutation=[3, 2, 1, 0], dims=(0, 1), fixed={2: 1, 3: 1})
    check_frames(anim)
    result = anim.grid("result")
    assert result.dims == (0, 1) and result.fixed == {2: 1, 3: 1}
    assert len(anim.frames) == 20 and all(f.index[2:] == (1, 1) for f in anim.frames)
    per_grid = xe.animate("transpose", operand, permutation=[3, 2, 1, 0], dims={"operand": (1, 2, 3)},
                          fixed={"operand": {0: 1}})
    assert per_grid.grid("operand").dims == (1, 2, 3) and per_grid.grid("operand").fixed == {0: 1}
    assert per_grid.grid("result").dims == (2, 3)  # the default: the last two, the others at 0
    with pytest.raises(ValueError, match="dims"):
        xe.animate("transpose", operand, permutation=[3, 2, 1, 0], dims=(0, 0))
    with pytest.raises(ValueError, match="no grid named"):
        xe.animate("transpose", operand, permutation=[3, 2, 1, 0], dims={"nope": (0, 1)})


# -- summaries, the API, the status table -------------------------------------------------------------

def big_gather(n=32, **kw):
    rng = np.random.default_rng(0)
    operand = rng.standard_normal((n, n)).astype(f32)
    indices = rng.integers(-2, n + 2, size=(n, n, 2)).astype(s32)
    return xe.animate("gather", operand, indices, offset_dims=[], collapsed_slice_dims=[0, 1],
                      start_index_map=[0, 1], index_vector_dim=2, slice_sizes=[1, 1], **kw)


def test_big_maps_keep_their_structure():
    # the default: the first row of the result whole, then the rest in even strides
    anim = big_gather()
    steps = [f.step for f in anim.frames]
    assert len(steps) == 60 and steps[:30] == list(range(30)) and steps[-1] == 1023
    assert all(b - a <= 35 for a, b in zip(steps[30:], steps[31:]))
    assert anim.summary == "60 of 1024 steps: the first 30, then one in ~33"
    check_frames(anim)
    first = big_gather(max_steps=200, sample="first")
    assert [f.step for f in first.frames] == list(range(200)) and first.summary == "steps 1-200 of 1024"
    even = big_gather(max_steps=5, sample="even")
    assert [f.step for f in even.frames] == [0, 256, 512, 767, 1023]
    assert even.summary == "5 of 1024 steps, evenly spaced"
    assert "frame 2 of 5: step 257 of 1024" in even.counter(even.frames[1])
    assert len(big_gather(max_steps=None).frames) == 1024


def test_frames_need_no_matplotlib_and_core_import_is_light():
    code = ("import sys, numpy as np, xla_explorer as xe; import xla_explorer.animate; "
            "from xla_explorer.ops import registry; assert 'gather' in registry.LAYERS['animation']; "
            "a = xe.animate('reverse', np.arange(3.), dimensions=[0]); "
            "assert a.frames[0].indices('operand', 'read') == {(2,)}; "
            "sys.exit(1 if 'matplotlib' in sys.modules else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_registered_layer_and_errors():
    table = xe.status_table(file=open(os.devnull, "w"))
    for opcode in ("gather", "scatter", "reduce-window", "pad", "dynamic-slice", "dynamic-update-slice", "slice",
                   "transpose", "broadcast", "reverse", "concatenate", "convolution", "select-and-scatter"):
        assert table.cell(opcode, "animation") == "yes"
        assert registry.LAYERS["animation"][opcode] is not None
    assert table.cell("add", "animation") == "-"
    with pytest.raises(NotImplementedError, match="has no animator; animated ops: .*gather"):
        xe.animate("add", np.ones(2, f32), np.ones(2, f32))
    assert callable(xe.animate) and A.animate is xe.animate.animate


# -- rendering (few steps) ---------------------------------------------------------------------------

def _rgb(hex_colour):
    return np.array([int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)])


def test_frames_are_legible_with_distinct_colours():
    """Every frame of each animation: text at least 10 px at the default dpi (in the
    matplotlib figure and the raster frames alike), one colour per role, one legend entry
    per meaning, cells coloured by their role."""
    import matplotlib.figure
    anims = [gather_windows(), big_gather(max_steps=6),
             xe.animate("pad", np.arange(6, dtype=f32).reshape(2, 3), f32(0),
                        padding_config=[(1, -1, 1), (0, 2, 0)], max_steps=6),
             xe.animate("scatter", np.zeros((4, 3), f32), np.array([[1], [7], [1]], s32), np.ones((3, 3), f32),
                        update_computation=add, update_window_dims=[1], inserted_window_dims=[0],
                        scatter_dims_to_operand_dims=[0],
                        index_vector_dim=1, max_steps=6)]
    colours = [c for c, _ in A.ROLES.values()] + [c for c, _ in A.STATIC.values()]
    assert len(set(colours)) == len(colours)
    rgb = np.array([_rgb(c) for c in colours])
    gaps = np.abs(rgb[:, None, :] - rgb[None, :, :]).sum(-1) + np.eye(len(rgb), dtype=int) * 999
    assert gaps.min() >= 40  # no two roles look alike
    for anim in anims:
        for k in range(len(anim.frames)):
            scene = A.draw.scene_of(anim, k)
            assert min(scene.fonts()) >= 10
            labels = [label for _, label in scene.legend]
            assert len(labels) == len(set(labels)) and len(scene.legend) == len({c for c, _ in scene.legend})
            # every colour on a cell is explained by the legend
            assert {r.fill for r in scene.rects} - {c for c, _ in scene.legend} <= {"#ffffff", A.scene.EMPTY}
            assert scene.fills() <= set(colours) | {"#ffffff", A.scene.EMPTY, }
        fig = anim.frame(len(anim.frames) - 1)
        assert isinstance(fig, matplotlib.figure.Figure) and fig.dpi == 100
        sizes = [t.get_fontsize() * fig.dpi / 72 for t in fig.axes[0].texts]
        assert sizes and min(sizes) >= 10 - 1e-9
    # the raster frame paints the current element in its colour
    anim = anims[0]
    scene = A.draw.scene_of(anim, 7)
    image = anim.image(7)
    cell = next(r for r in scene.rects if r.fill == A.ROLES["current"][0])
    assert (image[int(cell.y + 3), int(cell.x + 3)] == _rgb(A.ROLES["current"][0])).all()
    read = next(r for r in scene.rects if r.fill == A.ROLES["read"][0])
    assert (image[int(read.y + 3), int(read.x + 3)] == _rgb(A.ROLES["read"][0])).all()


def test_gif_html_png_svg(tmp_path):
    from PIL import Image
    small = xe.animate("reverse", np.arange(256, dtype=f32).reshape(16, 16), dimensions=[1], max_steps=4)
    gif = small.save(tmp_path / "rev.gif", fps=4)
    with Image.open(gif) as im:
        assert im.n_frames == 4
    html = small.to_jshtml()
    # the first frame is a plain image (shown before any script runs), then one per frame in the script
    assert html.count("data:image/png;base64") == 5 and html.index("<img src=\"data:image/png") < html.index("<script")
    assert small._repr_html_().startswith('<div id="xeanim')
    small.save(tmp_path / "rev.png", frame=2)
    small.save(tmp_path / "rev.svg", frame=2)
    assert (tmp_path / "rev.png").stat().st_size > 0 and "<svg" in (tmp_path / "rev.svg").read_text()


def test_big_arrays_are_drawn_through_a_window():
    operand = np.arange(200 * 300, dtype=f32).reshape(200, 300)
    anim = xe.animate("slice", operand, start_indices=[150, 7], limit_indices=[160, 290], strides=[2, 5],
                      max_steps=3, sample="even")
    f = anim.frames[-1]
    scene = A.draw.scene_of(anim, len(anim.frames) - 1)
    panel = next(p for p in scene.panels if p.grid == "operand")
    r0, c0, rows, cols = panel.window
    (r, c), = [anim.grid("operand").rc(p) for p in f.positions("operand", "read")]
    assert rows <= 12 and cols <= 16 and r0 <= r < r0 + rows and c0 <= c < c0 + cols
    assert any(t.text.startswith("window: rows") for t in scene.texts)


def test_html_of_a_big_gather_renders_quickly():
    # CPU time (this process's, the PNG encoder threads included), so that a loaded
    # machine does not count; a few seconds here, the bound is generous
    from cputime import best_cpu_seconds
    anim = big_gather()
    took, html = best_cpu_seconds(anim.to_jshtml, runs=2, below=20)
    assert html.count("data:image/png;base64") == 61
    assert took < 20, f"60 frames of a 32x32 gather took {took:.1f} s of CPU time"
    assert len(html) < 6e6


def test_stepper_is_a_slider_over_png_frames(monkeypatch):
    anim = xe.animate("reverse", np.arange(4, dtype=f32), dimensions=[0])
    monkeypatch.setitem(sys.modules, "ipywidgets", None)
    with pytest.raises(ImportError, match=r"xla_explorer\[widgets\]"):
        anim.stepper()
    monkeypatch.delitem(sys.modules, "ipywidgets")
    pytest.importorskip("ipywidgets")
    box = anim.stepper()
    assert box.shown == 0 and box.image.value[:8] == b"\x89PNG\r\n\x1a\n"
    box.slider.value = 3
    assert box.shown == 3
    from io import BytesIO
    from PIL import Image
    pixels = np.asarray(Image.open(BytesIO(box.image.value)).convert("RGB"))
    scene = A.draw.scene_of(anim, 3)
    cell = next(r for r in scene.rects if r.fill == A.ROLES["current"][0])
    assert (pixels[int(cell.y + 3), int(cell.x + 3)] == _rgb(A.ROLES["current"][0])).all()


# -- the newer maps: sort, top-k, bitcast, dynamic-reshape, collectives ----------------------------

@pytest.mark.parametrize("opcode, args, kw", [
    ("sort", (np.array([[3, 1, 2, 5], [0, 9, 7, 7]], f32),), dict(dimension=1, comparator=lambda a, b: xe.Lt(a, b))),
    ("topk", (np.array([[3, 1, 2, 5], [0, 9, 7, 7]], f32),), dict(k=2)),
    ("bitcast", (np.arange(6, dtype=f32).reshape(2, 3),), dict(shape=xe.Shape("s32", (3, 2)))),
    ("all-gather", (np.arange(8, dtype=f32).reshape(4, 2),), dict(all_gather_dim=0, shard_count=2,
                                                                  replica_groups=[[0, 1], [2, 3]])),
    ("all-reduce", (np.arange(8, dtype=f32).reshape(4, 2),), dict(computation=add, replica_groups=[[0, 3], [1, 2]])),
    ("collective-permute", (np.arange(12, dtype=f32).reshape(4, 3),), dict(source_target_pairs=[(0, 1), (1, 0)])),
    ("all-to-all", (np.arange(16, dtype=f32).reshape(4, 4),), dict(split_dimension=0, concat_dimension=0,
                                                                   split_count=2, replica_groups=[[0, 1], [2, 3]])),
    ("reduce-scatter", (np.arange(16, dtype=f32).reshape(4, 4),), dict(computation=add, scatter_dimension=0,
                                                                       replica_groups=[[0, 1], [2, 3]])),
])
def test_newer_maps_animate(opcode, args, kw):
    anim = animate(opcode, *args, **kw)
    assert anim.frames and all(f.text for f in anim.frames)
    for k in range(len(anim.frames)):   # legible, one legend entry per colour, every colour explained
        scene = A.draw.scene_of(anim, k)
        assert min(scene.fonts()) >= 10
        labels = [label for _, label in scene.legend]
        assert len(labels) == len(set(labels)) and len(scene.legend) == len({c for c, _ in scene.legend})
        assert {r.fill for r in scene.rects} - {c for c, _ in scene.legend} <= {"#ffffff", A.scene.EMPTY}
    if opcode == "sort":
        f = anim.frames[1]   # result[0, 1] = 2 came from position 2 of row 0
        assert f.indices("operand", "read") == {(0, 2)} and "holds position 2" in f.text
        # sorted with its positions (an argsort): both results' element [0, 1] is this step's
        keys = args[0]
        two = animate("sort", keys, np.broadcast_to(np.arange(4, dtype=s32), keys.shape).copy(), dimension=1,
                      comparator=lambda a, b, i, j: xe.Lt(a, b))
        f = two.frames[1]
        assert f.indices("result[0]", "current") == f.indices("result[1]", "current") == {(0, 1)}
        assert f.indices("operands[0]", "read") == f.indices("operands[1]", "read") == {(0, 2)}
        assert "result[1][0, 1] = operands[1][0, 2] = 2" in f.text
    if opcode == "topk":
        f = anim.frames[2]   # values[1, 0] = 9 at position 1
        assert f.indices("operand", "read") == {(1, 1)} and "indices[1, 0] = 1" in f.text
    if opcode == "collective-permute":
        f = anim.frames[-1]  # device 3 is no target: zeros
        assert f.index[0] == 3 and not f.positions("operand") and "receives nothing" in f.text
    if opcode == "all-reduce":
        f = anim.frames[0]   # device 0 with device 3: 0 + 6
        assert f.indices("operand", "read") == {(0, 0), (3, 0)} and "= 0 + 6 = 6" in f.text


def test_animation_of_an_instruction_in_a_called_computation_per_invocation():
    jax = pytest.importorskip("jax")
    x = np.arange(40, dtype=f32).reshape(10, 4)
    starts = np.array([0, 4, 9], s32)
    comp = xe.from_jax(lambda x, s: jax.lax.scan(lambda c, k: (c, jax.lax.dynamic_slice(x, (k, np.int32(1)), (3, 2))),
                                                 0.0, s)[1], x, starts)
    t = comp.trace(x, starts)
    name = next(r.name for r in t.records if r.opcode == "dynamic-slice" and r.shape.dims == (3, 2))
    anim = animate(comp, name, x, starts, invocation=1)
    assert anim.frames[0].indices("operand", "read") == {(4, 1)} and "invocation 1" in anim.title
