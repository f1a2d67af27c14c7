"""Headless tests of the ipywidgets UIs: set traitlets (or click), assert the effect."""
import shutil
import subprocess
import sys

import numpy as np
import pytest

import xla_explorer as xe
from xla_explorer.ops import registry


@pytest.fixture(scope="module")
def widgets():
    pytest.importorskip("ipywidgets", reason="ipywidgets is not installed (pip install 'xla_explorer[widgets]')")
    import xla_explorer.widgets as widgets
    return widgets


@pytest.fixture(scope="module")
def text():
    pytest.importorskip("ipywidgets", reason="ipywidgets is not installed (pip install 'xla_explorer[widgets]')")
    from xla_explorer.widgets import _text
    return _text


GATHER = "offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1, slice_sizes=[1, 4]"
X = np.arange(12, dtype=np.float32).reshape(3, 4)
I = np.array([[1], [7]], dtype=np.int32)  # row 7 is out of bounds: the start is clamped to 2


def gather_module():
    b = xe.XlaBuilder("demo")
    x = xe.Parameter(b, 0, xe.Shape("f32", (3, 4)), "x")
    i = xe.Parameter(b, 1, xe.Shape("s32", (2, 1)), "i")
    g = xe.Gather(x, i, offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0],
                  index_vector_dim=1, slice_sizes=[1, 4])
    return b.build(xe.Add(g, xe.Constant(b, np.float32(1)))), g.name


def test_core_never_imports_ipywidgets():
    code = ("import sys, numpy as np, xla_explorer as xe\n"
            "xe.Pad(np.ones((2, 2), np.float32), np.float32(0), padding_config=[(1, 1, 0), (0, 0, 0)])\n"
            "xe.status_table(file=open('/dev/null', 'w'))\n"
            "assert 'ipywidgets' not in sys.modules, 'the core imported ipywidgets'\n"
            "# the status table reads the widget layer from xla_explorer.widgets, which imports no ipywidgets\n")
    subprocess.run([sys.executable, "-c", code], check=True)


# -- BuilderWidget ------------------------------------------------------------------------------

def gather_builder(widgets):
    bw = widgets.BuilderWidget()
    bw.add_parameter("f32[3,4]", "x")
    bw.add_parameter("s32[2,1]", "i")
    bw.op_name = "Gather"
    bw.operands = ["x", "i"]
    return bw


def test_builder_lists_every_registered_op_with_a_function(widgets, text):
    bw = widgets.BuilderWidget()
    assert set(bw._family.options) == {op.family for op in registry.all_ops().values()}
    listed = set()
    for family in bw._family.options:
        bw._family.value = family
        listed |= {opcode for _, opcode in bw._op.options}
    expected = {opcode for opcode, op in registry.all_ops().items() if text.op_function(op) is not None}
    assert listed == expected and "gather" in listed and "reduce-window" in listed
    # the status table's widget column is what the OpPlayground builds (tests/test_playground.py)
    assert repr(registry.LAYERS["widget"]["gather"]) == "OpPlayground"


def test_builder_infers_the_shape_as_attributes_are_set(widgets):
    bw = gather_builder(widgets)
    assert bw.shape_text == "" and "offset_dims" in bw.error  # not all attributes yet
    assert list(bw._fields)[:5] == ["offset_dims", "collapsed_slice_dims", "start_index_map",
                                    "index_vector_dim", "slice_sizes"]
    bw.attrs_text = GATHER
    assert bw.shape_text == "f32[2,4]" and bw.error == ""
    assert bw._fields["slice_sizes"].value == "[1, 4]"  # the text reached the field
    assert len(bw.builder.instructions) == 2  # previewing records nothing


def test_builder_shows_the_shape_error_without_raising(widgets):
    bw = gather_builder(widgets)
    bw.attrs_text = GATHER
    bw._fields["slice_sizes"].value = "[1, 5]"  # as typed in the field
    assert "slice_sizes=[1, 5]" in bw.attrs_text
    assert bw.shape_text == ""
    assert "Gather" in bw.error and "slice_sizes[1]=5" in bw.error and "f32[3,4]" in bw.error
    assert "#b00020" in bw._result.value  # in red
    assert bw.add() is None and len(bw.builder.instructions) == 2
    bw._fields["slice_sizes"].value = "[1, 4]"
    assert bw.error == "" and bw.shape_text == "f32[2,4]"


def test_builder_add_records_the_op_and_shows_hlo(widgets):
    bw = gather_builder(widgets)
    bw.attrs_text = GATHER
    bw._add.click()
    assert "gather.1" in bw.values
    assert "gather.1 = f32[2,4]{1,0} gather(x, i)" in bw.hlo and "slice_sizes={1,4}" in bw.hlo
    bw.op_name = "add"  # an opcode is accepted, the API name kept
    assert bw.op_name == "Add"
    bw.operands = ["gather.1", "gather.1"]
    assert bw.shape_text == "f32[2,4]"
    op = bw.add()
    assert op.name == "add.2" and "ROOT add.2" in bw.hlo
    np.testing.assert_array_equal(bw.run(X, I), 2 * X[[1, 2]])
    assert bw.computation.result_shape == xe.Shape("f32", (2, 4))


def test_builder_computations_and_values_in_attributes(widgets):
    bw = widgets.BuilderWidget()
    bw.add_parameter("f32[3,4]", "x")
    bw.add_parameter("s32[]", "k")
    bw.op_name = "Constant"
    bw.operands = []
    bw.attrs_text = "value=0.0"
    assert bw.shape_text == "f32[]"
    zero = bw.add()
    bw.op_name = "Reduce"
    bw.operands = ["x", zero.name]
    bw.attrs_text = "computation=Max, dimensions=[1]"  # an op function for the computation
    assert bw.shape_text == "f32[3]", bw.error
    bw.add()
    np.testing.assert_array_equal(bw.run(X, np.int32(0)), X.max(axis=1))
    bw.op_name = "DynamicSlice"
    bw.operands = ["x"]
    bw.attrs_text = f"start_indices=[k, {zero.name}], slice_sizes=[2, 2]"  # dotted value names
    assert "DynamicSlice" in bw.error and "start_indices[1]" in bw.error and "f32[]" in bw.error
    bw.attrs_text = "start_indices=[k, k], slice_sizes=[2, 2]"
    assert bw.shape_text == "f32[2,2]"
    bw.add()
    np.testing.assert_array_equal(bw.run(X, np.int32(1)), X[1:3, 1:3])


def test_builder_reports_bad_input(widgets):
    bw = gather_builder(widgets)
    bw.attrs_text = "offset_dims=[1"
    assert "cannot read" in bw.error
    bw.attrs_text = "offset_dims=nothing"
    assert "unknown name 'nothing'" in bw.error
    bw.operands = ["x", "y"]
    assert "no value named 'y'" in bw.error
    assert bw.add_parameter("f32[3,") is None and "Shape.parse" in bw.error
    assert bw.add_parameter("f32[2]", "x") is None and "taken" in bw.error
    assert list(bw.builder.parameters) == [0, 1]
    with pytest.raises(Exception, match="unknown op"):
        bw.op_name = "NoSuchOp"


def test_builder_graph_or_message(widgets):
    bw = gather_builder(widgets)
    bw.attrs_text = GATHER.replace("[1, 4]", "[1, 5]")
    try:
        from xla_explorer import render
        has_graph = hasattr(render, "graph_of_builder") and shutil.which("dot")
    except ImportError:
        has_graph = False
    if has_graph:
        assert bw._graph.value.startswith("<svg") and "failed" in bw._graph.value
    else:
        assert "graph:" in bw._graph.value


# -- StepperWidget ------------------------------------------------------------------------------

def test_stepper_steps_through_the_instructions(widgets):
    comp, gather = gather_module()
    s = widgets.StepperWidget(comp, X, I, graph=False)
    assert s.n_steps == len(comp.entry.instructions)
    assert s.instruction.startswith("x = f32[3,4]") and "argument 0" in s.value_text
    k = [i.name for i in comp.entry.instructions].index(gather)
    s.step = k
    assert f"{gather} = f32[2,4]" in s.instruction and "gather(x, i)" in s.instruction
    assert "operands:" in s.value_text and "i: s32[2,1]" in s.value_text
    assert "[[ 4.  5.  6.  7.]\n" in s.value_text and "[ 8.  9. 10. 11.]]" in s.value_text
    s._slider.value = s.n_steps - 1  # the slider drives the step
    assert s.step == s.n_steps - 1 and s.instruction.startswith("ROOT add")
    with pytest.raises(Exception, match="outside"):
        s.step = s.n_steps


def test_stepper_summarises_big_values_and_diffs(widgets):
    comp = xe.parse_hlo("HloModule m\nENTRY e {\n  p = f32[100,100] parameter(0)\n"
                        "  ROOT l = f32[100,100] log(p)\n}\n")
    arg = np.linspace(-1, 1, 10000, dtype=np.float32).reshape(100, 100)
    s = widgets.StepperWidget(comp, arg, against=lambda a: np.log(np.abs(a)), graph=False)
    s.step = 1
    assert "l: f32[100,100] (10000 elements)" in s.value_text and "NaN 5000" in s.value_text
    assert "against: max |difference|" in s.value_text and "5000 of 10000" in s.value_text


def test_stepper_against_jax_per_instruction(widgets):
    pytest.importorskip("jax", reason="jax is not installed")
    comp, gather = gather_module()
    s = widgets.StepperWidget(comp, X, I, against="jax", graph=False)
    assert "vs jax" not in s.value_text  # an argument
    s.step = [i.name for i in comp.entry.instructions].index(gather)
    assert "numpy vs jax: ok; max |difference| 0, 0 of 8 elements beyond tolerance" in s.value_text


def test_stepper_graph_when_render_is_there(widgets):
    comp, gather = gather_module()
    s = widgets.StepperWidget(comp, X, I)
    if not (hasattr(comp, "graph") and shutil.which("dot")):
        assert "graph:" in s._graph.value
        return
    s.step = 2
    assert s._graph.value.startswith("<svg") and "drop-shadow" in s._graph.value


# -- IndexMapStepper ----------------------------------------------------------------------------

@pytest.mark.parametrize("use_animation", [False, True])
def test_index_map_stepper_gather_clamped(widgets, use_animation):
    comp, gather = gather_module()
    m = widgets.IndexMapStepper(comp, gather, X, I, use_animation=use_animation)
    assert m.n_steps == 8
    assert "reads   x[1, 0]" in m.access_text and "clamped" not in m.access_text
    m.step = 5  # result[1, 1]: start 7 clamped to 2
    assert m.access.index == (1, 1) and m.access.clamped
    assert f"{gather}[1, 1]" in m.access_text and "reads   x[2, 1]" in m.access_text
    assert "clamped" in m.access_text


def test_index_map_stepper_on_values(widgets):
    m = widgets.IndexMapStepper("pad", np.arange(4, dtype=np.float32), np.float32(0),
                                padding_config=[(1, 1, 1)], use_animation=False)
    assert m.n_steps == 9
    m.step = 1
    assert "result[1]" in m.access_text and "reads   operand[0]" in m.access_text
    m.step = 2
    assert "reads   nothing (padding)" in m.access_text


# -- text helpers -------------------------------------------------------------------------------

def test_text_helpers(text):
    assert text.split_attrs("a=[1, 2], b='x.y', c=gather.1") == {"a": "[1, 2]", "b": "'x.y'", "c": "gather.1"}
    assert text.parse_value("[(1, 1, 0), (0, -1, 1)]") == [(1, 1, 0), (0, -1, 1)]
    assert text.parse_value("[gather.1, k]", {"gather.1": "G", "k": "K"}) == ["G", "K"]
    assert text.parse_value("'a.b c.d'") == "a.b c.d"
    with pytest.raises(ValueError, match="unknown name"):
        text.parse_value("foo")
    assert text.format_value(np.float32(2), "v") == "v: f32[] = 2."
    big = np.zeros((10, 10), np.float32)
    big[0, 0] = np.nan
    assert text.format_value(big, "b") == "b: f32[10,10] (100 elements)  min 0  max 0  mean 0  NaN 1  Inf 0"
    assert "t[1]: s32[]" in text.format_value((np.float32(1), np.int32(3)), "t")
    access = xe.Access(index=(1,), reads=((0, (2,)),), clamped=True, detail={"start_index": [7]})
    assert text.format_access(access, ["operand"]).splitlines()[:2] == ["result[1]", "  reads   operand[2]"]
