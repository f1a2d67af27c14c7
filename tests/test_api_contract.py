"""The public API block of DESIGN.md, call for call: tests outside the repo use exactly this."""
import numpy as np
import pytest

import xla_explorer as xe


def test_design_api_block(tmp_path, capsys):
    assert str(xe.Shape("f32", (2, 3))) == "f32[2,3]"
    assert str(xe.Shape("f32", (None, 3))) == "f32[?,3]"
    assert str(xe.Shape.parse("(f32[2,3], s32[])")) == "(f32[2,3], s32[])"
    assert str(xe.Shape.parse("token[]")) == "token[]"

    b = xe.XlaBuilder("demo")
    x = xe.Parameter(b, 0, xe.Shape("f32", (3, 4)), "x")
    i = xe.Parameter(b, 1, xe.Shape("s32", (2, 1)), "i")
    g = xe.Gather(x, i, offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0],
                  index_vector_dim=1, slice_sizes=[1, 4])
    assert str(g.shape) == "f32[2,4]"
    y = xe.Add(g, xe.Constant(b, np.float32(1)))
    comp = b.build(y)
    text = comp.as_hlo_text()
    assert "gather(" in text and "slice_sizes={1,4}" in text
    x_val = np.arange(12, dtype=np.float32).reshape(3, 4)
    i_val = np.array([[1], [7]], np.int32)
    want = np.stack([x_val[1], x_val[2]]) + 1  # 7 is clamped to the last row
    for backend in ("numpy", "numba"):
        np.testing.assert_array_equal(comp.run(x_val, i_val, backend=backend), want)
    assert b.build() is not None  # build() alone takes the last op

    r = xe.Reduce(x, xe.Constant(b, np.float32(0)), lambda a, c: xe.Add(a, c), dimensions=[1])
    assert str(r.shape) == "f32[3]"
    padded = xe.Pad(np.ones((2, 2), np.float32), np.float32(0), padding_config=[(1, 1, 1), (0, 0, 0)])
    assert isinstance(padded, np.ndarray) and padded.shape == (5, 2)

    again = xe.parse_hlo(text)
    np.testing.assert_array_equal(again.run(x_val, i_val), want)

    m = xe.index_map(comp, g.name)
    assert m[(0, 0)].reads
    status = xe.status_table()
    assert "gather" in capsys.readouterr().out and status.cell("gather", "reference") == "yes"


def test_errors_name_op_argument_rule_and_values():
    b = xe.XlaBuilder("bad")
    x = xe.Parameter(b, 0, xe.Shape("f32", (3, 4)), "x")
    i = xe.Parameter(b, 1, xe.Shape("s32", (2, 1)), "i")
    with pytest.raises(xe.ShapeError) as e:
        xe.Gather(x, i, offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0],
                  index_vector_dim=1, slice_sizes=[1, 5])
    assert isinstance(e.value, ValueError)
    msg = str(e.value)
    assert "Gather" in msg and "slice_sizes" in msg and "5" in msg and "f32[3,4]" in msg


def test_window_padding_forms():
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    for padding in ("SAME", "VALID", [(1, 1), (1, 1)]):
        out = xe.ReduceWindow(x, np.float32(-np.inf), lambda a, c: xe.Max(a, c), window_dimensions=[2, 2],
                              window_strides=[2, 2], padding=padding)
        assert out.ndim == 2


def test_replicated_run():
    b = xe.XlaBuilder("psum")
    x = xe.Parameter(b, 0, xe.Shape("f32", (2,)), "x")
    comp = b.build(xe.CrossReplicaSum(x))
    outs = comp.run_replicated([[np.full(2, k, np.float32)] for k in range(4)])
    assert len(outs) == 4 and all(np.array_equal(o, np.full(2, 6, np.float32)) for o in outs)


def test_graph_and_animation(tmp_path):
    pytest.importorskip("matplotlib")
    b = xe.XlaBuilder("g")
    x = xe.Parameter(b, 0, xe.Shape("f32", (4, 4)), "x")
    i = xe.Parameter(b, 1, xe.Shape("s32", (2, 1)), "i")
    g = xe.Gather(x, i, offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0],
                  index_vector_dim=1, slice_sizes=[1, 4])
    comp = b.build(g)
    graph = comp.graph()
    assert "gather" in graph.source
    graph.save(str(tmp_path / "g.dot"))
    assert (tmp_path / "g.dot").exists()
    anim = xe.animate(comp, g.name, np.ones((4, 4), np.float32), np.array([[0], [9]], np.int32), max_steps=3)
    anim.save(str(tmp_path / "gather.gif"))
    assert (tmp_path / "gather.gif").stat().st_size > 0
