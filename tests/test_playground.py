"""The op playground: its model (``xla_explorer.playground``, no widget library) and the
``OpPlayground`` widget driven through its traitlets, every op of the registry included."""
import numpy as np
import pytest

import xla_explorer as xe
from xla_explorer import playground as P
from xla_explorer.ops import arguments as A
from xla_explorer.ops import registry

#: ops the playground cannot build, and why (the status table shows "-" for them)
NOT_BUILDABLE = {"fusion": "no public function"}


# -- the model ------------------------------------------------------------------------------------

def test_every_op_is_described_and_built_or_says_why():
    built = set()
    for opcode in registry.all_ops():
        ok = P.buildable(opcode)
        if ok is True:
            built.add(opcode)
        else:
            assert opcode in NOT_BUILDABLE and NOT_BUILDABLE[opcode] in ok, (opcode, ok)
    assert len(built) == len(registry.all_ops()) - len(NOT_BUILDABLE)


def test_the_status_widget_column_is_what_the_playground_builds():
    pytest.importorskip("ipywidgets")
    table = xe.status_table(file=open("/dev/null", "w"))
    column = {op for op, _, _, cells in table.rows if cells["widget"] != "-"}
    assert column == {op for op in registry.all_ops() if P.buildable(op) is True}
    assert table.cell("gather", "widget") == "yes" and table.cell("fusion", "widget") == "-"


@pytest.mark.parametrize("opcode", sorted(op for op in registry.all_ops() if op not in NOT_BUILDABLE))
def test_every_op_runs_from_its_starting_values(opcode):
    call = P.OpCall(opcode)
    outcome = call.run(call.explain())
    assert outcome.ok, outcome.error
    assert outcome.shape == outcome.computation.result_shape
    assert outcome.result is not None or outcome.not_run, opcode
    # a collective: one result per simulated device
    results = outcome.result if outcome.devices is not None else [outcome.result]
    if outcome.devices is not None:
        assert len(results) == outcome.devices >= 1
    if outcome.result is not None and outcome.shape.is_array and outcome.shape.is_static:
        assert all(np.shape(r) == tuple(outcome.shape.dims) for r in results)


def test_arguments_come_from_signature_schema_and_hints():
    args = {a.name: a for a in A.arguments("gather")}
    assert [a.name for a in A.arguments("Gather")][:2] == ["operand", "start_indices"]
    assert args["operand"].kind == args["start_indices"].kind == "array"
    assert args["slice_sizes"].kind == "sizes" and args["slice_sizes"].of == "operand"
    assert args["offset_dims"].kind == "dims" and args["indices_are_sorted"].kind == "bool"
    compare = {a.name: a for a in A.arguments("compare")}
    assert compare["comparison_direction"].kind == "enum"
    assert compare["comparison_direction"].choices == ("EQ", "NE", "GE", "GT", "LE", "LT")
    rw = {a.name: a for a in A.arguments("reduce-window")}
    assert rw["padding"].kind == "padding" and rw["window_strides"].kind == "sizes"
    assert rw["computation"].kind == "computation" and rw["computation"].region == "reducer"
    conv = {a.name: a for a in A.arguments("convolution")}
    assert conv["window_strides"].drop == 2 and conv["preferred_element_type"].kind == "dtype"
    assert [a.name for a in A.arguments("conditional")] == ["branch_index", "branch_computations", "branch_operands"]
    with pytest.raises(A.NotDescribed, match="no public function"):
        A.arguments("fusion")
    with pytest.raises(NotImplementedError, match="unknown op"):
        A.arguments("NoSuchOp")


def test_region_choices_are_library_functions():
    reducers = A.region_choices("reducer")
    assert list(reducers)[:4] == ["Add", "Max", "Min", "Mul"] and reducers["Add"] is xe.Add
    b = xe.XlaBuilder("r")
    x = xe.Parameter(b, 0, xe.Shape("f32", (4,)), "x")
    r = xe.Reduce([x, x], [np.float32(0), np.float32(0)], A.region_choices("reducer", 2)["Max"], dimensions=[0])
    np.testing.assert_array_equal(b.build(r).run(np.float32([1, 5, 2, 3])), (5, 5))
    assert "Compare(a, b, 'LT')" in A.region_choices("comparator")
    with pytest.raises(ValueError, match="unknown computation family"):
        A.region_choices("nonsense")


def test_operand_sources():
    assert P.operand_value(P.Source("s32[2,3]")).tolist() == [[0, 1, 2], [3, 4, 5]]
    a = P.operand_value(P.Source("f32[3]", "random", seed=7))
    np.testing.assert_array_equal(a, P.operand_value(P.Source("f32[3]", "random", seed=7)))
    assert not np.array_equal(a, P.operand_value(P.Source("f32[3]", "random", seed=8)))
    assert P.operand_value(P.Source("f32[2,2]", "typed", typed="-inf")).tolist() == [[-np.inf] * 2] * 2
    assert P.operand_value(P.Source("pred[2]", "typed", typed="[true, false]")).dtype == np.bool_
    t = P.operand_value(P.Source("(f32[2], s32[])"))
    assert isinstance(t, tuple) and t[1].dtype == np.int32
    for src, message in [(P.Source("f32[3,"), "cannot read the shape"),
                         (P.Source("f32[2,2]", "typed", typed="[1, 2, 3]"), r"does not fit f32\[2,2\]"),
                         (P.Source("f32[2]", "typed", typed="[1, oops]"), "cannot read"),
                         (P.Source("f32[2]", "typed", typed=""), "type the values"),
                         (P.Source("f32[1000,1000]"), "at most"),
                         (P.Source("f32[2]", "nonsense"), "not one of")]:
        with pytest.raises(P.OperandError, match=message):
            P.operand_value(src, "x")


def test_an_error_names_its_argument_and_what_would_be_legal():
    call = P.OpCall("Gather", slice_sizes=[1, 5])
    out = call.explain()
    assert not out.ok and out.shape is None and out.shape_text == ""
    assert out.error == "Gather: slice_sizes[1]=5 is larger than operand dimension 1 (f32[3,4])"
    assert out.argument == "slice_sizes" and out.legal == "legal here: slice_sizes[1] = 0..4"
    out = P.OpCall("Pad", padding_config=[(1, 1, -1), (0, 0, 0)]).explain()
    assert out.argument == "padding_config" and out.legal == "legal here: padding_config[0][2] = 0 or more"
    out = P.OpCall("Transpose", permutation=[0, 0]).explain()
    assert out.legal == "legal here: permutation = [1, 0] or [0, 1]"
    out = P.OpCall("gather", start_indices="f32[2,1]").explain()
    assert out.argument == "start_indices" and "s32[2,1]" in out.legal
    out = P.OpCall("Compare", comparison_direction="LT", rhs="s32[2,3]").explain()
    assert out.argument == "rhs" and out.legal == "legal here: rhs = f32[2,3]"  # the argument just changed
    out = P.OpCall("Concatenate", dimension=1).explain()
    assert out.argument == "dimension" and out.legal == "legal here: dimension = 0"
    # an error that names no argument: shown as the call's, nothing to probe
    call = P.OpCall("Conditional")
    call.set("branch_operands", ["f32[2,3]", "s32[]"])
    out = call.explain()
    assert out.error.startswith("Conditional: branch 1 returns s32[]") and out.argument == "" and out.legal == ""


def test_blame():
    args = A.arguments("reduce")
    msg = "Reduce: computation: while tracing (f32[], s32[]): Add: lhs is f32[] but the operands differ"
    assert P.blame(msg, args, prefer="operands") == "computation"  # the rule's own argument leads
    assert P.blame("Reduce: 2 operands but 1 init_values", args) == "operands"
    assert P.blame("Reduce: 2 operands but 1 init_values", args, prefer="init_values") == "init_values"
    assert P.blame("Reduce: nothing named here", args) == ""


def test_per_dimension_arguments_follow_their_operand():
    call = P.OpCall("DynamicSlice")
    assert call.values["slice_sizes"] == (2, 2) and len(call.values["start_indices"]) == 2
    changed = call.set("operand", "f32[3,4,5]")
    assert changed == {"operand", "slice_sizes", "start_indices"}
    assert call.values["slice_sizes"] == (2, 2, 1) and len(call.values["start_indices"]) == 3
    assert call.build().shape_text == "f32[2,2,1]"
    call = P.OpCall("ConvGeneralDilated")
    call.set("lhs", "f32[1,1,5]")  # one spatial dimension: the window loses one entry
    assert call.values["window_strides"] == (1,) and call.values["padding"] == ((1, 1),)
    call = P.OpCall("Reduce")
    assert call.set("operands", ["f32[2,3]", "s32[2,3]"]) >= {"init_values"}
    assert len(call.values["init_values"]) == 2


def test_computation_choices_follow_the_operand_count():
    call = P.OpCall("Call")
    assert "Add" in call.choices("computation") and "Neg" not in call.choices("computation")
    assert call.set("args", ["f32[2,3]"]) == {"args", "computation"}  # Add takes 2: reset to a unary op
    assert call.values["computation"] == "Neg" and call.run().result.tolist() == [[0, -1, -2], [-3, -4, -5]]


def test_run_results_and_why_not():
    out = P.OpCall("Gather").run()
    np.testing.assert_array_equal(out.result, np.arange(12, dtype=np.float32).reshape(3, 4)[[2, 0]])
    out = P.OpCall("AllGather", replica_groups=[], shard_count=3).run()  # no group named: 3 devices
    assert out.ok and out.devices == 3 and [r.tolist() for r in out.result] == [[0, 1, 2, 3, 4, 5]] * 3
    out = P.OpCall("AllGather", replica_groups=[[0, 9]]).run()
    assert out.ok and out.result is None and "name 10 devices" in out.not_run
    out = P.OpCall("Infeed").run()
    assert out.ok and out.result is None and "Infeed" in out.not_run
    out = P.OpCall("Iota", shape="s32[400,400]").run()
    assert out.ok and out.result is None and "at most" in out.not_run
    out = P.OpCall("Parameter").run()  # the op makes its own parameter: it gets a value too
    assert out.result.shape == (2, 3)


def test_while_with_a_tuple_state():
    call = P.OpCall("While")
    assert call.set("init", "(s32[], f32[3])") == {"init", "condition", "body"}  # presets of the new state
    assert call.values["condition"] == "x[0] < 10" and call.values["body"] == "(x[0] + 1, x[1] + 1)"
    assert "max(x[1]) < 10" in call.choices("condition") and "(x[0] + 1, x[1] * 2)" in call.choices("body")
    out = call.run()
    assert out.result[0] == 10 and out.result[1].tolist() == [10, 11, 12]
    call.set("body", "(x[0] + 2, x[1] - x[1])")  # typed: kept when the state changes again
    assert call.run().result[1].tolist() == [0, 0, 0] and call.typed == {"body"}
    call.set("init", "(s32[], f32[4])")
    assert call.values["body"] == "(x[0] + 2, x[1] - x[1])" and call.run().result[1].shape == (4,)
    for text, message in [("(x[0] + 1, x[1] *", "cannot read"), ("(x[0] + 1, y)", "name 'y' is not defined"),
                          ("x[0] + 1", "the body returns s32[]")]:
        call.set("body", text)
        out = call.explain()
        assert out.argument == "body" and message in out.error, out.error
        assert "(x[0] + 1, x[1] + 1)" in out.legal  # the presets that would do
    call.set("init", "f32[3]")  # back to an array: array presets
    call.set("body", "x * 1")   # never ends: stopped, and said so
    out = call.run()
    assert out.ok and out.result is None and "stopped after" in out.not_run and "condition" in out.not_run


def test_conditional_with_tuple_operands():
    call = P.OpCall("Conditional")
    call.set("branch_operands", ["(s32[], f32[2])", "(s32[], f32[2])"])
    assert call.values["branch_computations"] == ("Neg (each element)", "Abs (each element)")
    out = call.run()
    assert out.ok and out.result[0] == 0 and out.result[1].tolist() == [0, 1]  # branch 1: Abs
    call.set("branch_index", ("s32[]", 0))
    assert call.run().result[1].tolist() == [0, -1]
    call.set("branch_operands", ["f32[2]", "f32[2]"])  # arrays again: the functions themselves
    assert call.values["branch_computations"] == ("Neg", "Abs") and call.run().ok


def test_collectives_run_on_simulated_devices():
    call = P.OpCall("AllReduce", replica_groups=[[0, 2], [1, 3]])
    out = call.run()
    assert out.devices == 4 and out.arguments[0].shape == (4, 2, 3)  # stacked device-first
    stacked = np.arange(24, dtype=np.float32).reshape(4, 2, 3)   # iota counts on across devices
    np.testing.assert_array_equal(out.arguments[0], stacked)
    for d, pair in enumerate([(0, 2), (1, 3), (0, 2), (1, 3)]):
        np.testing.assert_array_equal(out.result[d], stacked[pair[0]] + stacked[pair[1]])
    out = P.OpCall("CollectivePermute", operand=P.Source("s32[2]", "typed", typed="[[1, 2], [3, 4]]")).run()
    assert [r.tolist() for r in out.result] == [[3, 4], [1, 2]]   # typed per device
    out = P.OpCall("ReplicaId").run()
    assert [int(r) for r in out.result] == [0, 1]


def test_an_op_recorded_by_another_call_opens_as_that_call():
    # SendDone's operand must be the send it waits for: its playground is Send's, the
    # send-done the result (RecvDone's too: the whole (value, token), not Recv's value)
    call = P.OpCall("SendDone", channel_handle=3)
    assert call.function is xe.Send and [a.name for a in call.args] == ["operand", "channel_handle"]
    outcome = call.run()
    assert outcome.ok and outcome.instruction.startswith("send-done") and str(outcome.shape) == "token[]"
    assert outcome.computation.entry.root.opcode == "send-done"
    assert outcome.computation.entry.root.attrs["channel_id"] == 3
    outcome = P.OpCall("recv-done").build()
    assert outcome.ok and str(outcome.shape) == "(f32[2,3], token[])"
    assert outcome.computation.entry.root.opcode == "recv-done"


def test_set_refuses_unknown_arguments():
    with pytest.raises(KeyError, match="no argument 'nope'"):
        P.OpCall("Pad").set("nope", 1)
    with pytest.raises(xe.ShapeError, match="an operand is a shape text"):
        P.OpCall("Pad", operand=3.5)


# -- the widget -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def OpPlayground():
    pytest.importorskip("ipywidgets")
    from xla_explorer.widgets import OpPlayground
    return OpPlayground


def _error_beside(pg, name):
    return pg._errors[name].value


def test_playground_controls_are_the_arguments(OpPlayground):
    pg = OpPlayground("Gather", graph=False)
    assert list(pg.controls) == [a.name for a in A.arguments("gather")]
    assert all(c.description == name for name, c in pg.controls.items())
    assert list(pg.inputs) == ["operand", "start_indices"]
    assert pg.shape_text == "f32[2,4]" and pg.error == "" and pg.error_control == ""
    np.testing.assert_array_equal(pg.result, np.float32([[8, 9, 10, 11], [0, 1, 2, 3]]))
    assert "gather(operand, start_indices)" in pg.hlo and "result: f32[2,4]" in pg.result_text
    view = pg._index.children[0]
    if hasattr(xe, "index_map_view"):  # the interactive view: hover a result element, see what it reads
        view.select((0, 1))
        assert view.highlighted["operand"][(2, 1)] == "read"  # result[0, 1] reads operand[2, 1]
    else:
        assert type(view).__name__ == "IndexMapStepper"


def test_playground_shows_the_error_beside_the_control_and_recovers(OpPlayground):
    pg = OpPlayground("Gather", graph=False)
    pg.controls["slice_sizes"].value = (1, 5)
    assert pg.shape_text == "" and pg.result is None
    assert pg.error == "Gather: slice_sizes[1]=5 is larger than operand dimension 1 (f32[3,4])"
    assert pg.error_control == "slice_sizes" and pg.legal == "legal here: slice_sizes[1] = 0..4"
    beside = _error_beside(pg, "slice_sizes")
    assert "slice_sizes[1]=5" in beside and "0..4" in beside and "#b00020" in beside
    assert all(_error_beside(pg, n) == "" for n in pg.controls if n != "slice_sizes")
    assert "see <b>slice_sizes</b>" in pg._shape.value and pg.hlo == ""
    pg.controls["slice_sizes"].value = (1, 2)
    assert pg.shape_text == "f32[2,2]" and pg.error == "" and _error_beside(pg, "slice_sizes") == ""


def test_playground_every_kind_of_control(OpPlayground):
    pg = OpPlayground("Compare", graph=False, index_map=False)
    pg.controls["comparison_direction"].value = "GT"  # a dropdown of the enum's choices
    assert pg.call.values["comparison_direction"] == "GT" and pg.result.dtype == np.bool_
    assert pg.controls["compare_type"].options[0] == ("(default)", None)
    pg.controls["broadcast_dimensions"].set_entries([0])  # optional dims: "+" from the default
    assert pg.call.values["broadcast_dimensions"] == (0,)
    pg.controls["broadcast_dimensions"].set_entries([])  # back to None, the default
    assert pg.call.values["broadcast_dimensions"] is None and pg.error == ""

    pg = OpPlayground("ReduceWindow", graph=False, index_map=False)
    pg.controls["padding"].value = "SAME"
    assert pg.shape_text == "f32[2,2]"
    pg.controls["padding"]._mode.value = "pairs"  # as the dropdown is used
    assert pg.call.values["padding"] == ((0, 0), (0, 0)) == pg.controls["padding"].value
    pg.controls["computation"].value = "Max"
    assert pg.result.tolist() == [[5, 7], [13, 15]]

    pg = OpPlayground("AllGather", graph=False, index_map=False)
    pg.controls["channel_id"]._text.value = "abc"  # a text that does not read
    assert pg.error_control == "channel_id" and "not an integer" in pg.error
    assert "not an integer" in _error_beside(pg, "channel_id")
    pg.controls["channel_id"]._text.value = "3"
    assert pg.error == "" and pg.call.values["channel_id"] == 3
    pg.controls["replica_groups"]._text.value = "[[0, 1], [2]]"
    assert pg.error_control == "replica_groups"
    pg.controls["replica_groups"]._text.value = "[[0, 1"
    assert "cannot read" in pg.error

    pg = OpPlayground("ConvertElementType", graph=False)
    pg.controls["new_element_type"].value = "pred"  # a dtype dropdown
    assert pg.shape_text == "pred[2,3]"


def test_playground_operand_inputs(OpPlayground):
    pg = OpPlayground("Pad", graph=False)
    inp = pg.inputs["operand"]
    inp._shape.value = "f32[3,"  # typed in the shape box
    assert pg.error_control == "operand" and "cannot read the shape" in pg.error
    assert "cannot read the shape" in _error_beside(pg, "operand")
    inp._shape.value = "f32[2,2,2]"  # rank 3: padding_config gets a third triple
    assert pg.controls["padding_config"].value == ((1, 1, 0), (0, 0, 1), (0, 0, 0))
    assert pg.shape_text == "f32[4,3,2]"
    inp._source.value = "typed"
    inp._typed.value = "[1, 2, 3]"
    assert pg.error_control == "operand" and "does not fit" in pg.error
    inp._typed.value = "7"
    assert pg.error == "" and pg.result[1, 0, 0] == 7
    inp._source.value = "random"
    inp._seed.value = 3
    assert pg.call.values["operand"].seed == 3 and pg.error == ""
    inp._shape.value = "f32[1000,1000]"
    assert "at most" in pg.error and pg.error_control == "operand"
    inp._shape.value = "f32[2,3]"
    pg.controls["padding_value"].value = P.Source("s32[]")
    assert pg.error_control == "padding_value" and "f32[]" in pg.legal


def test_playground_operand_lists(OpPlayground):
    pg = OpPlayground("Concatenate", graph=False, index_map=False)
    assert list(pg.inputs) == ["operands"] and len(pg.controls["operands"].items) == 2
    pg.controls["operands"]._more.click()
    assert len(pg.call.values["operands"]) == 3 and pg.shape_text == "f32[4,3]"
    pg.controls["operands"].items[2]._shape.value = "f32[1,4]"
    assert pg.error_control == "operands" or pg.error_control == "dimension"
    pg.controls["operands"]._less.click()
    assert pg.shape_text == "f32[3,3]" and pg.error == ""
    pg = OpPlayground("Reduce", graph=False, index_map=False)
    pg.controls["operands"]._more.click()  # a second operand: a second init value follows
    assert len(pg.controls["init_values"].items) == 2 and pg.shape_text == "(f32[2], f32[2])"


def test_playground_general_errors_and_ops(OpPlayground):
    pg = OpPlayground("Conditional", graph=False, index_map=False)
    pg.controls["branch_operands"].value = [P.Source("f32[2,3]"), P.Source("s32[]")]
    assert pg.error_control == "" and "branch 1 returns s32[]" in pg._general_error.value
    pg.op = "pad"  # an opcode: the API name is kept, the controls are Pad's
    assert pg.op == "Pad" and list(pg.controls) == ["operand", "padding_value", "padding_config"]
    assert pg.shape_text == "f32[4,5]" and pg._general_error.value == ""
    with pytest.raises(Exception, match="unknown op"):
        pg.op = "NoSuchOp"
    with pytest.raises(Exception, match="cannot build Fusion"):
        pg.op = "fusion"
    assert OpPlayground("Slice", start_indices=[0, 1], graph=False).shape_text == "f32[3,2]"


def test_playground_every_op(OpPlayground):
    for opcode in sorted(registry.all_ops()):
        if opcode in NOT_BUILDABLE:
            continue
        pg = OpPlayground(opcode, graph=False, index_map=False)
        assert pg.error == "" and pg.shape_text, (opcode, pg.error)
        assert all(c.description == n for n, c in pg.controls.items())


def test_playground_of_an_op_another_call_records(OpPlayground):
    pg = OpPlayground("SendDone")
    assert pg.error == "" and pg.shape_text == "token[]" and set(pg.controls) == {"operand", "channel_handle"}
    assert "<code>Send(operand, channel_handle)</code>" in pg._signature.value
    assert "SendDone is recorded by Send" in pg._signature.value


def test_playground_tuple_loop_state(OpPlayground):
    pg = OpPlayground("While", graph=False, index_map=False)
    body = pg.controls["body"]
    assert body.description == "body" and "x * 2" in body.options  # editable, the presets offered
    pg.inputs["init"].value = "(s32[], f32[3])"
    assert pg.error == "" and body.value == "(x[0] + 1, x[1] + 1)" and "(x[0] + 1, x[1] * 2)" in body.options
    assert pg.controls["condition"].value == "x[0] < 10" and pg.shape_text == "(s32[], f32[3])"
    body.value = "(x[0] + 1, x[1] * 2)"
    assert pg.result[1].tolist() == [0, 1024, 2048]
    body.value = "(x[0] + 1,"
    assert pg.error_control == "body" and "cannot read" in _error_beside(pg, "body")
    pg = OpPlayground("Conditional", graph=False, index_map=False)
    pg.inputs["branch_operands"].value = ["(s32[], f32[2])", "(s32[], f32[2])"]
    assert pg.error == "" and pg.controls["branch_computations"].value == ("Neg (each element)", "Abs (each element)")
    assert "Exp (each element)" in pg.controls["branch_computations"].options


def test_playground_collective_per_device(OpPlayground):
    pg = OpPlayground("AllGather", graph=False)
    assert pg.shape_text == "f32[4]" and len(pg.result) == 2 and "device 1" in pg._values.value
    assert "on each of 2 simulated devices" in pg._shape.value
    view = pg._index.children[0]
    if hasattr(view, "select"):
        view.select((1, 3))  # device 1's element 3 is device 1's operand element 1
        assert view.highlighted["operand"] == {(1, 1): "read"}
    pg.controls["replica_groups"]._text.value = "[[0, 1, 2]]"
    assert pg.shape_text == "f32[6]" and len(pg.result) == 3


def test_playground_graph_and_index_map(OpPlayground):
    import shutil
    pg = OpPlayground("Gather")
    if shutil.which("dot"):
        assert pg._graph.value.startswith("<div class='xe-scroll'") and "<svg" in pg._graph.value
    else:
        assert "graph:" in pg._graph.value
    pg = OpPlayground("Add")
    assert "has no index map" in pg._index.children[0].value
    pg.controls["lhs"].value = P.Source("f32[5]")
    assert "not legal" in pg._graph.value and "not legal" in pg._index.children[0].value


def test_one_change_one_rebuild(OpPlayground):
    """A per-dimension control redrawn by the model must not echo its entries back."""
    pg = OpPlayground("ReduceWindow", graph=False, index_map=False)
    builds = []
    real_run = pg.call.run
    pg.call.run = lambda outcome=None: builds.append(1) or real_run(outcome)
    pg.controls["window_strides"].value = (1, 1)
    pg.inputs["operands"].items[0]._shape.value = "f32[4,4,2]"  # the window gets a third entry
    assert len(builds) == 2 and pg.controls["window_dimensions"].value == (2, 2, 1)


def test_scripts_set_values_as_the_call_takes_them(OpPlayground):
    pg = OpPlayground("Concatenate", graph=False, index_map=False)
    pg.inputs["operands"].value = ["f32[1,3]", ("f32[1,3]", 7)]  # shape texts, (shape, values)
    assert pg.shape_text == "f32[2,3]" and pg.result[1].tolist() == [7, 7, 7]
    with pytest.raises(Exception, match="an operand is a shape text"):
        pg.inputs["operands"].value = [3.5]
    pg = OpPlayground("Gather", graph=False, index_map=False)
    pg.inputs["operand"].value = "f32[4,4]"
    pg.controls["slice_sizes"].value = [1, 4, 4]  # set by hand: kept, and the rule says what is wrong
    assert pg.error_control == "slice_sizes" and "has 3 entries" in pg.error
    assert pg.legal == "legal here: slice_sizes = [1, 4]"

