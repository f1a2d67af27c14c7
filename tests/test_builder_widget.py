"""Headless tests of BuilderWidget: set traitlets (or click), assert the effect, every error
path included; the Python it exports is run and must give the same HLO text."""
import shutil

import numpy as np
import pytest
import traitlets

import xla_explorer as xe
from xla_explorer.ops import registry


@pytest.fixture(scope="module")
def widgets():
    pytest.importorskip("ipywidgets", reason="ipywidgets is not installed (pip install 'xla_explorer[widgets]')")
    import xla_explorer.widgets as widgets
    return widgets


GATHER = "offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1, slice_sizes=[1, 4]"
X = np.arange(12, dtype=np.float32).reshape(3, 4)
I = np.array([[1], [7]], dtype=np.int32)  # row 7 is out of bounds: the start is clamped to 2


def gather_builder(widgets):
    bw = widgets.BuilderWidget()
    bw.add_parameter("f32[3,4]", "x")
    bw.add_parameter("s32[2,1]", "i")
    bw.op_name = "Gather"
    bw.operands = ["x", "i"]
    return bw


def op(bw, name, operands, attrs=""):
    """Set the op, its operands and arguments, press Add; the op must be accepted."""
    bw.op_name, bw.operands, bw.attrs_text = name, list(operands), attrs
    result = bw.add()
    assert result is not None, f"{name}: {bw.error_control}: {bw.error}"
    return result


def rebuilt(bw):
    """Run bw.python_code() in a fresh namespace: its `comp` must print as bw's module."""
    names = [i.name for c in bw.computation.computations for i in c.instructions]
    assert len(names) == len(set(names)), names  # module-unique, as XLA's verifier wants
    namespace = {}
    exec(bw.python_code(), namespace)  # our own generated code, in a test
    assert namespace["comp"].as_hlo_text() == bw.computation.as_hlo_text(), bw.python_code()
    return namespace["comp"]


def has_graph():
    try:
        from xla_explorer import render
        return hasattr(render, "graph_of_builder") and bool(shutil.which("dot"))
    except ImportError:
        return False


def test_builder_lists_every_registered_op_with_a_function(widgets):
    from xla_explorer.widgets import _text
    bw = widgets.BuilderWidget()
    assert set(bw._family.options) == {op.family for op in registry.all_ops().values()}
    listed = set()
    for family in bw._family.options:
        bw._family.value = family
        listed |= {opcode for _, opcode in bw._op.options}
    expected = {opcode for opcode, op in registry.all_ops().items() if _text.op_function(op) is not None}
    assert listed == expected and {"gather", "while", "conditional", "call", "sort", "select-and-scatter"} <= listed


def test_builder_infers_the_shape_as_attributes_are_set(widgets):
    bw = gather_builder(widgets)
    assert bw.shape_text == "" and "offset_dims" in bw.error  # not all attributes yet
    assert bw.error_control == "offset_dims"                  # the first one missing
    assert list(bw._fields)[:5] == ["offset_dims", "collapsed_slice_dims", "start_index_map",
                                    "index_vector_dim", "slice_sizes"]
    assert all(f.description == name for name, f in bw._fields.items())
    bw.attrs_text = GATHER
    assert bw.shape_text == "f32[2,4]" and bw.error == "" and bw.error_control == ""
    assert bw._fields["slice_sizes"].value == "[1, 4]"  # the text reached the field
    assert len(bw.builder.instructions) == 2  # previewing records nothing


def test_builder_shows_the_shape_error_beside_its_field(widgets):
    bw = gather_builder(widgets)
    bw.attrs_text = GATHER
    bw._fields["slice_sizes"].value = "[1, 5]"  # as typed in the field
    assert "slice_sizes=[1, 5]" in bw.attrs_text
    assert bw.shape_text == ""
    assert "Gather" in bw.error and "slice_sizes[1]=5" in bw.error and "f32[3,4]" in bw.error
    assert bw.error_control == "slice_sizes"
    assert "#b00020" in bw._errors["slice_sizes"].value and "slice_sizes[1]=5" in bw._errors["slice_sizes"].value
    assert bw._errors["offset_dims"].value == ""  # only beside the field at fault
    assert bw.add() is None and len(bw.builder.instructions) == 2
    bw._fields["slice_sizes"].value = "[1, 4]"
    assert bw.error == "" and bw.shape_text == "f32[2,4]" and bw._errors["slice_sizes"].value == ""


def test_builder_signature_line_is_html_not_rst(widgets):
    bw = gather_builder(widgets)
    assert "``" not in bw._signature.value and "<code>" in bw._signature.value
    assert "Gather(operand, start_indices" in bw._signature.value


def test_builder_enter_in_the_operand_box_adds_it(widgets):
    bw = widgets.BuilderWidget()
    bw.add_parameter("f32[3,4]", "x")
    bw.op_name = "Add"
    assert "x" in bw._operand_entry.options
    bw._operand_entry.value = "x"  # what the browser sends on Enter (continuous_update=False)
    assert bw.operands == ["x"] and bw._operand_entry.value == ""
    bw._operand_entry.value = "x"
    assert bw._operands.value == ["x", "x"] and bw.shape_text == "f32[3,4]"


def test_builder_add_records_the_op_and_hlo_keeps_every_op(widgets):
    bw = gather_builder(widgets)
    bw.attrs_text = GATHER
    bw._add.click()
    assert "gather.1" in bw.values
    assert "gather.1 = f32[2,4]{1,0} gather(x, i)" in bw.hlo and "slice_sizes={1,4}" in bw.hlo
    one = op(bw, "Constant", [], "value=1.0")
    # two values nobody uses yet: the module returns both, so the HLO keeps the gather
    assert "gather.1 = " in bw.hlo and f"ROOT outputs = (f32[2,4]{{1,0}}, f32[]) tuple(gather.1, {one.name})" in bw.hlo
    bw.op_name = "add"  # an opcode is accepted, the API name kept
    assert bw.op_name == "Add"
    bw.operands = ["gather.1", one.name]
    assert bw.shape_text == "f32[2,4]"
    added = bw.add()
    # the scalar is broadcast first (broadcast.3, not a value of its own), then added
    assert added.name == "add.4" and "ROOT add.4" in bw.hlo and "broadcast.3 = f32[2,4]" in bw.hlo
    np.testing.assert_array_equal(bw.run(X, I), X[[1, 2]] + 1)
    assert bw.computation.result_shape == xe.Shape("f32", (2, 4))
    bw.root = "gather.1"  # a chosen root: the ops it does not need leave the module
    assert "ROOT gather.1" in bw.hlo and "add.4" not in bw.hlo
    with pytest.raises(Exception, match="no value named"):
        bw.root = "nothing"
    assert bw.root == "gather.1"
    bw.root = ""
    assert "ROOT add.4" in bw.hlo
    if has_graph():  # the graph draws the same module
        graph = bw.computation.graph()
        assert {n.inst.name for n in graph.nodes if getattr(n, "inst", None) is not None} >= {"gather.1", "add.4"}
        assert "<svg" in bw._graph.value
    rebuilt(bw)


def test_builder_computations_and_values_in_attributes(widgets):
    bw = widgets.BuilderWidget()
    bw.add_parameter("f32[3,4]", "x")
    bw.add_parameter("s32[]", "k")
    zero = op(bw, "Constant", [], "value=0.0")
    bw.op_name = "Reduce"
    bw.operands = ["x", zero.name]
    bw.attrs_text = "computation=Max, dimensions=[1]"  # an op function for the computation
    assert bw.shape_text == "f32[3]", bw.error
    assert "Max" in bw._fields["computation"].options  # a list to pick from, typing allowed
    reduce = bw.add()
    np.testing.assert_array_equal(bw.run(X, np.int32(0)), X.max(axis=1))
    bw.op_name = "DynamicSlice"
    bw.operands = ["x"]
    bw.attrs_text = f"start_indices=[k, {zero.name}], slice_sizes=[2, 2]"  # dotted value names
    assert "DynamicSlice" in bw.error and "start_indices[1]" in bw.error and "f32[]" in bw.error
    assert bw.error_control == "start_indices"
    bw.attrs_text = "start_indices=[k, k], slice_sizes=[2, 2]"
    assert bw.shape_text == "f32[2,2]"
    sliced = bw.add()
    out = bw.run(X, np.int32(1))  # two unused values: a tuple
    np.testing.assert_array_equal(out[0], X.max(axis=1))
    np.testing.assert_array_equal(out[1], X[1:3, 1:3])
    assert [r.name for r in bw._root_ops()] == [reduce.name, sliced.name]
    rebuilt(bw)


def test_builder_reports_bad_input_beside_the_control(widgets):
    bw = gather_builder(widgets)
    bw.attrs_text = "offset_dims=[1"
    assert "cannot read" in bw.error and bw.error_control == "add"
    bw.attrs_text = "offset_dims=nothing"
    assert "unknown name 'nothing'" in bw.error and bw.error_control == "offset_dims"
    assert "nothing" in bw._errors["offset_dims"].value
    bw.operands = ["x", "y"]
    assert "unknown name 'y'" in bw.error and bw.error_control == "operands"
    assert "#b00020" in bw._errors["operands"].value
    assert bw.add_parameter("f32[3,") is None and "Shape.parse" in bw.error and bw.error_control == "parameter"
    assert bw.add_parameter("f32[2]", "x") is None and "taken" in bw.error
    assert list(bw.builder.parameters) == [0, 1]
    with pytest.raises(Exception, match="unknown op"):
        bw.op_name = "NoSuchOp"
    assert bw.op_name == "Gather"
    bw.operands = ["x", "i"]
    bw.attrs_text = GATHER
    assert bw.add() is not None


REFUSED = [  # (op, operands, arguments, the control the error is beside)
    ("Parameter", [], "parameter_number=-1, shape='f32[2]'", "parameter_number"),
    ("Parameter", [], "parameter_number=7, shape='f32[2]'", "parameter_number"),
    ("Parameter", [], "parameter_number=0, shape='f32[2]'", "parameter_number"),
    ("Parameter", [], "parameter_number=2, shape='f32[2'", "shape"),
    ("Constant", [], "value=[1, [2]]", None),
    ("Slice", ["x"], "start_indices=[0, 0], limit_indices=[9, 9]", "limit_indices"),
    ("Reduce", ["x", "x"], "computation=Add, dimensions=[1]", None),
    ("Reduce", ["x", "0.0"], "computation=nowhere, dimensions=[1]", "computation"),
    ("Transpose", ["x"], "permutation=[0, 0]", "permutation"),
    ("Iota", [], "shape='f32[-1]'", None),
    ("Add", ["x", "i"], "", None),
    ("GetTupleElement", ["x"], "index=0", None),
]


def test_builder_stays_usable_after_any_refused_value(widgets):
    bw = widgets.BuilderWidget()
    bw.add_parameter("f32[3,4]", "x")
    bw.add_parameter("s32[2,1]", "i")
    for name, operands, attrs, control in REFUSED:
        before = (len(bw.builder.instructions), dict(bw.builder.parameters), dict(bw.values), bw.hlo)
        bw.op_name, bw.operands, bw.attrs_text = name, operands, attrs
        assert bw.add() is None, (name, attrs)
        assert bw.error and (control is None or bw.error_control == control), (name, attrs, bw.error_control,
                                                                              bw.error)
        assert (len(bw.builder.instructions), dict(bw.builder.parameters), dict(bw.values), bw.hlo) == before
        neg = op(bw, "Neg", ["x"])  # still works, and the module still builds
        assert f"ROOT {neg.name}" in bw.hlo or neg.name in bw.hlo
        bw.undo()
    op(bw, "Parameter", [], "parameter_number=2, shape='f32[2]', name='z'")
    assert [p.name for p in bw.computation.entry.parameters] == ["x", "i", "z"]
    rebuilt(bw)


def while_builder(widgets):
    """doubling: (i, v) -> (i + 1, v + v) while i < 3, with cond and body built in nested builders."""
    bw = widgets.BuilderWidget("doubling")
    bw.add_parameter("f32[3]", "v")
    zero = op(bw, "Constant", [], "value=0")
    init = op(bw, "Tuple", [zero.name, "v"])
    cond = bw.new_computation("cond", "(s32[], f32[3])")
    i = op(cond, "GetTupleElement", ["cond_p0"], "index=0")
    three = op(cond, "Constant", [], "value=3")
    op(cond, "Compare", [i.name, three.name], "comparison_direction='LT'")
    body = bw.new_computation("body", "(s32[], f32[3])")
    bi = op(body, "GetTupleElement", ["body_p0"], "index=0")
    bv = op(body, "GetTupleElement", ["body_p0"], "index=1")
    one = op(body, "Constant", [], "value=1")
    op(body, "Tuple", [op(body, "Add", [bi.name, one.name]).name, op(body, "Add", [bv.name, bv.name]).name])
    return bw, cond, body, init


def test_builder_while_from_nested_builders(widgets):
    bw, cond, body, init = while_builder(widgets)
    assert [bw._subs.get_title(k) for k in range(2)] == ["cond", "body"]
    assert "cond" in bw._operand_entry.options
    bw.op_name, bw.operands = "While", []
    assert "cond" in bw._fields["condition"].options and "body" in bw._fields["body"].options
    loop = op(bw, "While", [], f"condition=cond, body=body, init={init.name}")
    assert "condition=cond, body=body" in bw.hlo and "ROOT " + loop.name in bw.hlo
    i, v = bw.run(np.ones(3, np.float32))
    assert int(i) == 3 and v.tolist() == [8, 8, 8]
    rebuilt(bw)
    # a sub-computation in use cannot change; undo the op using it and it can again
    assert body.add() is None and "cannot change" in body.error
    assert body.undo() == [] and len(body.actions) == 7  # its parameter and 6 ops
    assert bw.undo() == [loop.name] and "while" not in bw.hlo
    assert body.undo() and len(body.actions) == 6


def test_builder_while_sub_computation_errors(widgets):
    bw, cond, body, init = while_builder(widgets)
    # the body must return the loop state: a body returning one element is refused
    short = bw.new_computation("short", "(s32[], f32[3])")
    op(short, "GetTupleElement", ["short_p0"], "index=0")
    bw.op_name, bw.operands, bw.attrs_text = "While", [], f"condition=cond, body=short, init={init.name}"
    assert bw.add() is None and "body" in bw.error and bw.error_control == "body"
    empty = bw.new_computation("empty")
    bw.attrs_text = f"condition=empty, body=body, init={init.name}"
    assert "nothing built yet" in bw.error
    assert bw.new_computation("body") is None and "exists already" in bw.error
    assert bw.error_control == "computation name" and "exists" in bw._errors["computation name"].value
    assert bw.new_computation("not a name") is None and "identifier" in bw.error
    assert bw.new_computation("Add") is None and "op function" in bw.error
    assert empty is not None and bw.new_computation("fine") is not None


def test_builder_conditional_call_sort_select_and_scatter(widgets):
    bw = widgets.BuilderWidget("many")
    bw.add_parameter("f32[4,4]", "x")
    bw.add_parameter("pred[]", "p")
    assert bw.add_computation("scaled", lambda a: xe.Neg(a) * 2.0, "f32[4,4]") is not None
    twice = bw.new_computation("twice", "f32[4,4]")
    op(twice, "Add", ["twice_p0", "twice_p0"])
    op(bw, "Conditional", ["p", "x", "scaled", "x", "twice"])
    op(bw, "Call", ["twice", "x"])
    k = op(bw, "Constant", [], "value=1")
    op(bw, "Conditional", [k.name, "[scaled, twice]", "[x, x]"])  # the N-branch form: branch 1
    less = bw.new_computation("greater", "f32[]", "f32[]")
    op(less, "Compare", ["greater_p0", "greater_p1"], "comparison_direction='GT'")
    op(bw, "Sort", ["x"], "comparator=greater, dimension=1")
    op(bw, "Sort", ["[x, x]"], "dimension=0")  # the default comparator
    zero = op(bw, "Constant", [], "value=0.0")
    source = op(bw, "Slice", ["x"], "start_indices=[0, 0], limit_indices=[2, 2]")
    op(bw, "SelectAndScatter", ["x"], f"select=Ge, window_dimensions=[2, 2], window_strides=[2, 2], "
                                      f"padding='VALID', source={source.name}, init_value={zero.name}, scatter=Add")
    parsed = xe.parse_hlo("HloModule q\nENTRY e {\n  p = f32[] parameter(0)\n  ROOT n = f32[] negate(p)\n}\n")
    assert bw.add_computation("from_text", parsed) is None and "['p'] are taken" in bw.error
    parsed = xe.parse_hlo("HloModule q\nENTRY e {\n  q = f32[] parameter(0)\n  ROOT n = f32[] negate(q)\n}\n")
    assert bw.add_computation("from_text", parsed) is parsed
    op(bw, "Map", ["[x]", "from_text"])
    comp = rebuilt(bw)
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    out, again = bw.run(x, np.bool_(True)), comp.run(x, np.bool_(True))
    for a, b in zip(out, again):
        for u, v in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
            np.testing.assert_array_equal(u, v)
    np.testing.assert_array_equal(out[0], -2 * x)
    np.testing.assert_array_equal(out[2], 2 * x)  # branch_computations[1]
    np.testing.assert_array_equal(out[3], -np.sort(-x, axis=1))
    # max pooling's gradient: each window's source value lands on the window's largest element
    expected = np.zeros((4, 4), np.float32)
    expected[1, 1], expected[1, 3], expected[3, 1], expected[3, 3] = x[:2, :2].ravel()
    np.testing.assert_array_equal(out[5], expected)
    np.testing.assert_array_equal(out[6], -x)  # the map of the parsed negate
    code = bw.python_code()
    assert "xe.While" not in code and "xe.Sort(x, comparator=greater, dimension=1)" in code
    assert "from_text = xe.parse_hlo(" in code or "from_text = b_" in code
    assert bw.add_computation("bad", lambda a: xe.Add(a, a, a), "f32[]") is None
    assert "tracing" in bw.error and bw.error_control == "computation name"
    assert bw.add_computation("bad", 42) is None and "callable" in bw.error


def test_builder_run_box(widgets):
    bw = gather_builder(widgets)
    bw.attrs_text = GATHER
    bw.add()
    assert set(bw.inputs) == {"x", "i"} and bw.inputs["x"].description == "x"
    assert "numpy" in bw._backend.options and bw.backend == "numpy"
    bw.inputs["i"].value = "[[1], [7]]"
    bw._run_button.click()
    assert bw.run_error == "" and "result: f32[2,4]" in bw.run_text and "numpy" in bw.run_text
    assert "[ 8.  9. 10. 11.]" in bw.run_text
    bw.inputs["i"].value = "[[1.5], [7]]"
    bw._run_button.click()
    assert "fractions" in bw.run_error and "#b00020" in bw._errors["input i"].value and bw.run_text == ""
    bw.inputs["i"].value = "[[1, 2]]"
    bw._run_button.click()
    assert "shape" in bw.run_error and bw._errors["input i"].value
    bw.inputs["i"].value = "random(3)"
    bw._run_button.click()
    assert bw.run_error == "" and bw._errors["input i"].value == ""
    # what the student typed is quoted cut short: 5,000 digits do not come back whole
    for typed in ("9" * 5000, "[" + ", ".join(["1.5"] * 3000) + "]", "nope" * 2000):
        bw.inputs["i"].value = typed
        bw._run_button.click()
        assert bw.run_error and len(bw.run_error) < 400 and "characters" in bw.run_error, bw.run_error[:500]
        assert len(bw._errors["input i"].value) < 800
    bw.attrs_text = "offset_dims=" + "9" * 5000
    bw.add()
    assert bw.error and len(bw.error) < 400
    with pytest.raises(traitlets.TraitError) as info:
        bw.op_name = "Nope" * 5000
    assert len(str(info.value).split("; ops:")[0]) < 200
    bw.inputs["i"].value = "random(3)"
    with pytest.raises(Exception, match="not available"):
        bw.backend = "tpu"
    if "numba" in bw._backend.options:
        bw.backend = "numba"
        bw.inputs["i"].value = "zeros"
        bw._run_button.click()
        assert bw.run_error == "" and "(numba," in bw.run_text and "[0. 1. 2. 3.]" in bw.run_text


def test_builder_graph_or_message(widgets):
    bw = gather_builder(widgets)
    bw.attrs_text = GATHER.replace("[1, 4]", "[1, 5]")
    if has_graph():
        assert "<svg" in bw._graph.value and "failed" in bw._graph.value
    else:
        assert "graph:" in bw._graph.value


def test_builder_run_shows_progress_of_long_work(widgets, monkeypatch):
    from xla_explorer import progress
    bw = widgets.BuilderWidget()
    bw.add_parameter("f32[3]", "x")
    op(bw, "Neg", ["x"])
    run = xe.XlaComputation.run

    def slow_run(self, *args, **kw):  # what a first Numba run reports while it compiles
        with progress.task("numba: compiling", total=2, announce=True) as t:
            t.advance(detail="negate")
            t.started -= 1.0  # it took a second: its bar stays
            t.advance(detail="done")
        with progress.task("numba: quick", announce=True):
            pass  # quicker than the bar's delay: its bar goes when it ends
        return run(self, *args, **kw)
    monkeypatch.setattr(xe.XlaComputation, "run", slow_run)
    bw._run_button.click()
    assert bw.run_error == "" and "result: f32[3]" in bw.run_text
    (bar,) = bw._progress.children
    assert "numba: compiling" in bar.label.value and bar.bar.value == 1.0 and "done in 1.0 s" in bar.text.value


def test_builder_run_names_the_kernel_a_first_numba_run_compiles(widgets, monkeypatch, tmp_path):
    pytest.importorskip("numba")
    from xla_explorer.executors import jit_cache
    from xla_explorer.widgets import progress as bars
    # an empty kernel cache: the fused loop compiles, as in a fresh install
    monkeypatch.setattr(jit_cache, "_dir", tmp_path)
    monkeypatch.setattr(jit_cache, "_modules", {})

    class Shown(bars.NotebookProgress):
        """Every bar shown at once and kept: a small fused loop can compile in 0.2 s, under
        the 0.3 s after which a bar shows, so whether it stays would depend on the machine."""
        def __init__(self, delay=0.0, display=None):
            super().__init__(delay=0.0, display=display)
    monkeypatch.setattr(bars, "NotebookProgress", Shown)
    bw = widgets.BuilderWidget()
    bw.add_parameter("f32[5]", "x")
    e = op(bw, "Exp", ["x"])
    op(bw, "Neg", [e.name])
    bw.backend = "numba"
    texts = []
    bw._progress.observe(lambda ch: [b.text.observe(lambda c: texts.append(c["new"]), names="value")
                                     for b in ch["new"]], names="children")
    bw._run_button.click()
    assert bw.run_error == "" and "result: f32[5]" in bw.run_text
    assert any("compiling generated fused loop" in t for t in texts), texts
    # the run's bar (after "cpu: loading Numba and its kernels" where Numba loads in this run)
    shown = [b.text.value for b in bw._progress.children]
    bar = next((b for b in bw._progress.children if "kernel compiled in" in b.text.value), None)
    assert bar is not None and bar.bar.bar_style == "success", shown

