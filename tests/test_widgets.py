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
