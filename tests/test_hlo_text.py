"""HLO text in and out: the parser on XLA's and JAX's forms, errors with line and column,
and print(parse(text)) parsing back to the same computation."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import xla_explorer as xe
from xla_explorer.hlo.literal import format_literal, parse_literal

JAX_STYLE = """HloModule jit_f, entry_computation_layout={(f32[2,3]{1,0}, s32[])->(f32[2,3]{1,0}, s32[])}

region_0.1 {
  a.1 = f32[] parameter(0)
  b.1 = f32[] parameter(1)
  ROOT add.1 = f32[] add(a.1, b.1)
}

ENTRY main.2 {
  x.1 = f32[2,3]{1,0} parameter(0)
  n.1 = s32[] parameter(1)
  c.1 = f32[] constant(-inf)
  t.1 = (f32[2,3]{1,0}, s32[]) tuple(x.1, n.1)
  g.1 = f32[2,3]{1,0} get-tuple-element(t.1), index=0
  ROOT r.1 = (f32[2,3]{1,0}, s32[]) tuple(g.1, n.1)
}
"""

OPTIMIZED_STYLE = """HloModule jit_f, is_scheduled=true, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

FileNames
1 "<string>"

StackFrames
1 {file_location_id=1 parent_frame_id=1}

%fused_computation (param_0.1: f32[4]) -> f32[4] {
  %param_0.1 = f32[4]{0} parameter(0)
  ROOT %t.0 = (f32[4]{0}) tuple(f32[4]{0} %param_0.1), metadata={op_name="jit(f)/x" stack_frame_id=1}
}

ENTRY %main.1 (x.1: f32[4]) -> f32[4] {
  %x.1 = f32[4]{0} parameter(0), metadata={op_name="x"}
  %f = (f32[4]{0}) fusion(f32[4]{0} %x.1), kind=kLoop, calls=%fused_computation
  ROOT %g = f32[4]{0} get-tuple-element((f32[4]{0}) %f), index=0
}
"""


def test_parse_jax_style_and_run():
    comp = xe.parse_hlo(JAX_STYLE)
    assert comp.name == "jit_f"
    assert [str(s) for s in comp.parameter_shapes] == ["f32[2,3]", "s32[]"]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = comp.run(x, np.int32(7))
    assert isinstance(out, tuple) and np.array_equal(out[0], x) and out[1] == 7


def test_parse_optimized_style_with_fusion_and_debug_sections():
    comp = xe.parse_hlo(OPTIMIZED_STYLE)
    assert comp.entry.root.opcode == "get-tuple-element"
    fusion = comp.instruction("f")
    assert fusion.attrs["kind"] == "kLoop" and fusion.attrs["calls"].name == "fused_computation"
    assert fusion.extra == {}
    np.testing.assert_array_equal(comp.run(np.ones(4, np.float32)), np.ones(4, np.float32))


def test_unknown_attributes_are_kept_verbatim():
    comp = xe.parse_hlo(OPTIMIZED_STYLE)
    x = comp.instruction("x.1")
    assert x.extra["metadata"] == '{op_name="x"}'
    assert 'metadata={op_name="x"}' in comp.as_hlo_text()


def test_print_parse_round_trip_is_stable():
    text = xe.parse_hlo(JAX_STYLE).as_hlo_text()
    assert xe.parse_hlo(text).as_hlo_text() == text
    assert "c.1 = f32[] constant(-inf)" in text  # parsed instructions are all kept, dead or not
    assert "ROOT r.1" in text


@pytest.mark.parametrize("text,line,what", [
    ("HloModule m\n\nENTRY e {\n  x = f32[2] parameter(0)\n  ROOT y = f32[2] bogus-op x)\n}\n", 5, "opcode"),
    ("HloModule m\n\nENTRY e {\n  x = f33[2] parameter(0)\n}\n", 4, "element type"),
    ("HloModule m\n\nENTRY e {\n  x = f32[2] parameter(0)\n  ROOT y = f32[2] tuple(z)\n}\n", 5, "not an instruction"),
    ("HloModule m\n\nENTRY e {\n  x = f32[2] parameter(0)\n  ROOT y = (f32[2]) tuple(x) index=0\n}\n", 5, "expected ','"),
    ("HloModule m\n\nENTRY e {\n  x f32[2] parameter(0)\n}\n", 4, "expected an instruction"),
    ("HloModule m\n\nENTRY e {\n  x = f32[2] parameter(0)\n  ROOT c = f32[2] call(x), to_apply=nowhere\n}\n", 5,
     "unknown computation"),
])
def test_errors_point_at_line_and_column(text, line, what):
    with pytest.raises(xe.HloParseError) as e:
        xe.parse_hlo(text)
    assert e.value.line == line
    assert e.value.column is not None and e.value.column >= 1
    assert what in str(e.value)


def test_missing_required_attribute():
    text = "HloModule m\n\nENTRY e {\n  x = (f32[2]) parameter(0)\n  ROOT g = f32[2] get-tuple-element(x)\n}\n"
    with pytest.raises(xe.HloParseError, match="missing attribute index="):
        xe.parse_hlo(text)


def test_unknown_opcode_parses_but_does_not_run():
    text = "HloModule m\n\nENTRY e {\n  x = f32[2] parameter(0)\n  ROOT y = f32[2] frobnicate(x), k=3\n}\n"
    comp = xe.parse_hlo(text)
    assert comp.entry.root.extra == {"k": "3"}
    with pytest.raises(NotImplementedError, match="frobnicate"):
        comp.run(np.zeros(2, np.float32))


def test_entry_without_marker_is_the_last_computation():
    text = "a {\n  p = f32[] parameter(0)\n  ROOT t = (f32[]) tuple(p)\n}\n\nb {\n  q = s32[] parameter(0)\n  ROOT t = (s32[]) tuple(q)\n}\n"
    comp = xe.parse_hlo(text)
    assert comp.entry.name == "b"


def test_built_computation_prints_and_parses_back():
    b = xe.XlaBuilder("demo")
    x = xe.Parameter(b, 0, xe.Shape("f32", (3,)), "x")
    t = xe.Tuple(x, xe.Constant(b, np.float32(2.5)))
    comp = b.build(xe.GetTupleElement(t, 1))
    text = comp.as_hlo_text()
    assert "constant(2.5)" in text and "get-tuple-element" in text and "index=1" in text
    again = xe.parse_hlo(text)
    assert again.as_hlo_text() == text
    assert again.run(np.zeros(3, np.float32)) == np.float32(2.5)


# -- literals ---------------------------------------------------------------------------

@pytest.mark.parametrize("t", ["f32", "f64", "f16", "bf16", "s8", "s64", "u64", "u8", "pred", "c64", "c128", "f8e4m3fn"])
@given(data=st.data())
@settings(max_examples=20, deadline=None)
def test_literal_round_trip(t, data):
    from xla_explorer import dtypes
    dt = dtypes.to_numpy(t)
    shape = data.draw(st.lists(st.integers(0, 3), max_size=3))
    n = int(np.prod(shape)) if shape else 1
    raw = data.draw(st.binary(min_size=n * dt.itemsize, max_size=n * dt.itemsize))
    if t == "pred":
        arr = (np.frombuffer(raw, np.uint8) & 1).astype(bool).reshape(shape)
    else:
        arr = np.frombuffer(raw, dt).reshape(shape).copy()
    text = format_literal(arr, t)
    back = parse_literal(text, xe.Shape(t, shape))
    assert back.dtype == arr.dtype and back.shape == arr.shape
    if t in dtypes.FLOATING or t in dtypes.COMPLEX:
        a64 = arr.astype(np.complex128 if t in dtypes.COMPLEX else np.float64)
        b64 = back.astype(a64.dtype)
        np.testing.assert_array_equal(np.isnan(a64), np.isnan(b64))
        ok = ~np.isnan(a64)
        np.testing.assert_array_equal(a64[ok], b64[ok])
    else:
        np.testing.assert_array_equal(back, arr)


@given(st.lists(st.sampled_from(["f32[2]", "s32[]", "(f32[2], pred[])", "u8[1,2,3]", "token[]"]), min_size=1, max_size=4),
       st.integers(0, 3))
@settings(max_examples=30, deadline=None)
def test_tuple_program_round_trip(param_shapes, pick):
    """Random programs of parameters, tuples and get-tuple-elements print and parse back."""
    b = xe.XlaBuilder("rt")
    params = [xe.Parameter(b, i, xe.Shape.parse(s), f"p{i}") for i, s in enumerate(param_shapes)]
    t = xe.Tuple(*params)
    g = xe.GetTupleElement(t, pick % len(params))
    comp = b.build(xe.Tuple(g, t))
    text = comp.as_hlo_text()
    again = xe.parse_hlo(text)
    assert again.as_hlo_text() == text
    assert str(again.result_shape) == str(comp.result_shape)
