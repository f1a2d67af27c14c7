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
