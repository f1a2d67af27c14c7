"""Collectives over simulated devices, channels, and partitioned (SPMD) modules."""
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xla_explorer as xe
from xla_explorer.errors import ExecutionError, ShapeError
from xla_explorer.executors import spmd
from xla_explorer.executors.reference import Rendezvous

F32 = np.float32


def build(fn, *param_shapes, name="c"):
    b = xe.XlaBuilder(name)
    params = [xe.Parameter(b, i, xe.Shape.parse(s) if isinstance(s, str) else s, f"p{i}")
              for i, s in enumerate(param_shapes)]
    return b.build(fn(*params))


def add(a, b):
    return xe.Add(a, b)


def round_trip(comp):
    text = comp.as_hlo_text()
    again = xe.parse_hlo(text)
    assert again.as_hlo_text() == text
    again.verify()
    return again


# -- ids ---------------------------------------------------------------------------------------

def test_replica_id_and_partition_id():
    b = xe.XlaBuilder("ids")
    comp = b.build(xe.Tuple(xe.ReplicaId(b), xe.PartitionId(b)))
    assert "replica-id()" in comp.as_hlo_text() and "partition-id()" in comp.as_hlo_text()
    out = round_trip(comp).run_replicated([[]] * 4, num_partitions=2)
    assert [(int(r), int(p)) for r, p in out] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert out[0][0].dtype == np.uint32
    assert int(comp.run()[0]) == 0  # one device


# -- AllReduce ---------------------------------------------------------------------------------

def test_all_reduce_spec_example():
    comp = build(lambda x: xe.AllReduce(x, add), "f32[2]")
    out = round_trip(comp).run_replicated([[F32([1.0, 2.5])], [F32([3.0, 5.25])]])
    for o in out:
        np.testing.assert_array_equal(o, F32([4.0, 7.75]))


def test_all_reduce_replica_group_subsets_and_max():
    comp = build(lambda x: xe.AllReduce(x, lambda a, b: xe.Max(a, b), replica_groups=[[0, 2], [1, 3]]), "s32[3]")
    args = [[np.array([d, -d, 10 * d], np.int32)] for d in range(4)]
    out = comp.run_replicated(args)
    np.testing.assert_array_equal(out[0], [2, 0, 20])
    np.testing.assert_array_equal(out[1], [3, -1, 30])
    np.testing.assert_array_equal(out[2], out[0])
    assert "replica_groups={{0,2},{1,3}}" in comp.as_hlo_text()


def test_all_reduce_tuple_and_list_operands():
    comp = build(lambda x, y: xe.AllReduce(xe.Tuple(x, y), add), "f32[2]", "f32[]")
    assert str(comp.result_shape) == "(f32[2], f32[])"
    assert "all-reduce(get-tuple-element" in comp.as_hlo_text()
    out = round_trip(comp).run_replicated([[F32([1, 2]), F32(d)] for d in range(3)])
    np.testing.assert_array_equal(out[2][0], [3, 6])
    assert float(out[2][1]) == 3
    comp2 = build(lambda x: xe.AllReduce([x, x], add), "f32[2]")
    assert str(comp2.result_shape) == "(f32[2], f32[2])"
    # one computation for every operand: their element types must agree
    _raises(lambda: build(lambda x, y: xe.AllReduce([x, y], add), "f32[2]", "s32[]"),
            "AllReduce", "operand 1 (s32[]) needs (s32[], s32[]) -> s32[]")


def test_cross_replica_sum_records_an_add_all_reduce():
    comp = build(lambda x: xe.CrossReplicaSum(x), "f32[2]")
    text = comp.as_hlo_text()
    assert "all-reduce(" in text and "add(" in text
    out = comp.run_replicated([[F32([1.0, 2.5])], [F32([3.0, 5.25])]])
    np.testing.assert_array_equal(out[1], F32([4.0, 7.75]))
    comp = build(lambda x: xe.CrossReplicaSum(x), "pred[2]")
    assert " or(" in comp.as_hlo_text()
    out = comp.run_replicated([[np.array([True, False])], [np.array([False, False])]])
    np.testing.assert_array_equal(out[0], [True, False])


def test_older_argument_forms():
    # 2018's replica_group_ids: one group id per replica ({0, 1, 0, 1}: groups {0, 2} and {1, 3})
    comp = build(lambda x: xe.CrossReplicaSum(x, replica_group_ids=[0, 1, 0, 1]), "s32[]")
    assert "replica_groups={{0,2},{1,3}}" in comp.as_hlo_text()
    assert [int(o) for o in comp.run_replicated([[np.int32(d)] for d in range(4)])] == [2, 4, 2, 4]
    comp = build(lambda x: xe.AllGather(x, all_gather_dimension=0, shard_count=2), "s32[1]")
    assert str(comp.result_shape) == "s32[2]"
    comp = build(lambda x: xe.ReduceScatter(x, add, scatter_dim=0, shard_count=2), "s32[2]")
    assert str(comp.result_shape) == "s32[1]"


def test_all_reduce_eager_on_one_device():
    np.testing.assert_array_equal(xe.AllReduce(F32([1, 2]), add), F32([1, 2]))


# -- AllGather ---------------------------------------------------------------------------------

def test_all_gather_spec_example():
    comp = build(lambda x: xe.AllGather(x, all_gather_dim=0, shard_count=2), "f32[2]")
    assert str(comp.result_shape) == "f32[4]"
    out = round_trip(comp).run_replicated([[F32([1.0, 2.5])], [F32([3.0, 5.25])]])
    for o in out:
        np.testing.assert_array_equal(o, F32([1.0, 2.5, 3.0, 5.25]))


def test_all_gather_dimension_1_with_groups_in_group_order():
    comp = build(lambda x: xe.AllGather(x, 1, replica_groups=[[2, 0], [3, 1]]), "s32[2,1]")
    assert "dimensions={1}" in comp.as_hlo_text()
    args = [[np.array([[d], [10 + d]], np.int32)] for d in range(4)]
    out = round_trip(comp).run_replicated(args)
    np.testing.assert_array_equal(out[0], [[2, 0], [12, 10]])
    np.testing.assert_array_equal(out[3], [[3, 1], [13, 11]])


# -- AllToAll ----------------------------------------------------------------------------------

def _all_to_all_expected(xs, split_dimension, concat_dimension):
    n = len(xs)
    return [np.concatenate([np.split(x, n, axis=split_dimension)[j] for x in xs], axis=concat_dimension)
            for j in range(n)]


def test_all_to_all_spec_example():
    comp = build(lambda x: xe.AllToAll(x, split_dimension=1, concat_dimension=0, split_count=4), "f32[4,16]")
    assert str(comp.result_shape) == "f32[16,4]"
    ops = [i.opcode for i in comp.entry.instructions]
    assert ops[1:] == ["all-to-all", "reshape", "transpose", "reshape"]
    assert "replica_groups={{0,1,2,3}}, dimensions={1}" in comp.as_hlo_text()
    xs = [np.arange(64, dtype=F32).reshape(4, 16) + 100 * d for d in range(4)]
    out = round_trip(comp).run_replicated([[x] for x in xs])
    for got, want in zip(out, _all_to_all_expected(xs, 1, 0)):
        np.testing.assert_array_equal(got, want)


def test_all_to_all_same_dimensions_is_one_instruction():
    comp = build(lambda x: xe.AllToAll(x, 0, 0, 2, replica_groups=[[1, 0]]), "s32[4]")
    assert [i.opcode for i in comp.entry.instructions] == ["parameter", "all-to-all"]
    out = comp.run_replicated([[np.array([0, 1, 2, 3], np.int32)], [np.array([4, 5, 6, 7], np.int32)]])
    np.testing.assert_array_equal(out[1], [4, 5, 0, 1])  # device 1 is first in its group
    np.testing.assert_array_equal(out[0], [6, 7, 2, 3])


def test_all_to_all_tuple_form():
    comp = build(lambda x, y: xe.AllToAllTuple([x, y]), "s32[2]", "s32[2]")
    args = [[np.array([10 * d, 10 * d + 1], np.int32), np.array([10 * d + 2, 10 * d + 3], np.int32)] for d in range(2)]
    out = round_trip(comp).run_replicated(args)
    np.testing.assert_array_equal(out[0][0], [0, 1])
    np.testing.assert_array_equal(out[0][1], [10, 11])
    np.testing.assert_array_equal(out[1][0], [2, 3])
    np.testing.assert_array_equal(out[1][1], [12, 13])


@settings(max_examples=15, deadline=None)
@given(n=st.sampled_from([1, 2, 3]), rank=st.integers(1, 3), data=st.data())
def test_all_to_all_matches_the_formula(n, rank, data):
    split = data.draw(st.integers(0, rank - 1))
    concat = data.draw(st.integers(0, rank - 1))
    dims = [data.draw(st.integers(1, 3)) for _ in range(rank)]
    dims[split] *= n
    comp = build(lambda x: xe.AllToAll(x, split, concat, n), xe.Shape("s32", dims))
    xs = [np.arange(np.prod(dims), dtype=np.int32).reshape(dims) + 1000 * d for d in range(n)]
    out = comp.run_replicated([[x] for x in xs])
    for got, want in zip(out, _all_to_all_expected(xs, split, concat)):
        np.testing.assert_array_equal(got, want)


# -- CollectivePermute ---------------------------------------------------------------------------

def test_collective_permute_ring_and_zeros():
    comp = build(lambda x: xe.CollectivePermute(x, [(0, 1), (1, 2), (2, 0)]), "f32[2]")
    assert "source_target_pairs={{0,1},{1,2},{2,0}}" in comp.as_hlo_text()
    out = round_trip(comp).run_replicated([[F32([d, d])] for d in range(3)])
    np.testing.assert_array_equal(out[0], [2, 2])
    np.testing.assert_array_equal(out[1], [0, 0])
    comp = build(lambda x: xe.CollectivePermute(x, [(0, 1), (1, 2)]), "s32[2]")
    out = comp.run_replicated([[np.array([d + 1, d + 1], np.int32)] for d in range(3)])
    np.testing.assert_array_equal(out[0], [0, 0])  # no source sends to replica 0
    np.testing.assert_array_equal(out[2], [2, 2])


# -- ReduceScatter -------------------------------------------------------------------------------

def test_reduce_scatter_spec_example():
    comp = build(lambda x: xe.ReduceScatter(x, add, scatter_dimension=0, shard_count=2), "f32[2]")
    out = round_trip(comp).run_replicated([[F32([1.0, 2.25])], [F32([3.0, 5.25])]])
    np.testing.assert_array_equal(out[0], F32([4.0]))
    np.testing.assert_array_equal(out[1], F32([7.5]))


@settings(max_examples=10, deadline=None)
@given(n=st.sampled_from([2, 3]), k=st.integers(1, 3), seed=st.integers(0, 99))
def test_reduce_scatter_then_all_gather_is_all_reduce(n, k, seed):
    comp = build(lambda x: xe.Tuple(xe.AllGather(xe.ReduceScatter(x, add, 0, n), 0, n), xe.AllReduce(x, add)),
                 xe.Shape("s32", (n * k, 2)))
    rng = np.random.default_rng(seed)
    out = comp.run_replicated([[rng.integers(-9, 9, (n * k, 2)).astype(np.int32)] for _ in range(n)])
    for gathered, reduced in out:
        np.testing.assert_array_equal(gathered, reduced)


# -- CollectiveBroadcast -------------------------------------------------------------------------

def test_collective_broadcast_from_the_first_of_each_group():
    comp = build(lambda x: xe.CollectiveBroadcast(x, [[1, 0], [2]]), "s32[]")
    out = round_trip(comp).run_replicated([[np.int32(10 + d)] for d in range(4)])
    assert [int(o) for o in out] == [11, 11, 12, 0]  # replica 3 is in no group: zeros


# -- who meets whom: CollectiveOpGroupMode ---------------------------------------------------------

@pytest.mark.parametrize("channel_id, use_global, groups, want", [
    (None, False, [], [20, 40, 20, 40]),                 # replica ids, per partition
    (1, False, [], [60, 60, 60, 60]),                    # replica ids x all partitions
    (1, False, [[0], [1]], [10, 10, 50, 50]),
    (1, True, [[0, 1], [2, 3]], [10, 10, 50, 50]),       # flattened device ids
    (1, True, [[0, 3], [1, 2]], [30, 30, 30, 30]),
])
def test_all_reduce_group_modes(channel_id, use_global, groups, want):
    comp = build(lambda x: xe.AllReduce(x, add, groups, channel_id=channel_id, use_global_device_ids=use_global),
                 "s32[]")
    # 2 replicas x 2 partitions: device d = 2 * replica + partition holds 10 * d
    out = round_trip(comp).run_replicated([[np.int32(10 * d)] for d in range(4)], num_partitions=2)
    assert [int(o) for o in out] == want


def test_cross_partition_modes_of_permute_and_all_to_all():
    swap = build(lambda x: xe.CollectivePermute(x, [(0, 1), (1, 0)], channel_id=1), "s32[]")
    out = swap.run_replicated([[np.int32(d)] for d in range(4)], num_partitions=2)
    assert [int(o) for o in out] == [1, 0, 3, 2]  # partitions swap within each replica
    swap = build(lambda x: xe.CollectivePermute(x, [(0, 1), (1, 0)]), "s32[]")
    out = swap.run_replicated([[np.int32(d)] for d in range(4)], num_partitions=2)
    assert [int(o) for o in out] == [2, 3, 0, 1]  # replicas swap within each partition
    a2a = build(lambda x: xe.AllToAll(x, 0, 0, 2, channel_id=1), "s32[2]")
    out = a2a.run_replicated([[np.array([10 * d, 10 * d + 1], np.int32)] for d in range(4)], num_partitions=2)
    np.testing.assert_array_equal(out[3], [21, 31])


def test_all_gather_cross_replica_and_partition_order():
    comp = build(lambda x: xe.AllGather(x, 0, 4, replica_groups=[[1, 0]], channel_id=1), "s32[1]")
    text = comp.as_hlo_text()
    again = round_trip(comp)
    assert "use_global_device_ids" not in text
    out = again.run_replicated([[np.array([d], np.int32)] for d in range(4)], num_partitions=2)
    np.testing.assert_array_equal(out[0], [2, 3, 0, 1])  # replica 1's partitions, then replica 0's


# -- shape rules -------------------------------------------------------------------------------

def _raises(fn, *fragments):
    with pytest.raises(ShapeError) as e:
        fn()
    for f in fragments:
        assert f in str(e.value), str(e.value)


def test_shape_rules_all_reduce():
    b = xe.XlaBuilder("bad")
    x = xe.Parameter(b, 0, xe.Shape("f32", (2,)), "x")
    _raises(lambda: xe.AllReduce(x, add, [[0, 1], [1, 2]]), "AllReduce", "names id 1 twice")
    _raises(lambda: xe.AllReduce(x, add, [[0], []]), "AllReduce", "empty group")
    _raises(lambda: xe.AllReduce(x, add, [[0, -1]]), "AllReduce", "negative id -1")
    _raises(lambda: xe.AllReduce(x, add, [[0, 1]], use_global_device_ids=True), "AllReduce",
            "use_global_device_ids=true needs a channel_id")
    _raises(lambda: xe.AllReduce(x, add, [], channel_id=1, use_global_device_ids=True), "explicit replica_groups")
    s32_add = build(add, "s32[]", "s32[]")
    _raises(lambda: xe.AllReduce(x, s32_add), "AllReduce", "(f32[], f32[]) -> f32[]")
    _raises(lambda: xe.AllReduce(xe.AfterAll(b), add), "AllReduce", "must be an array", "token[]")


def test_shape_rules_all_gather_and_reduce_scatter():
    b = xe.XlaBuilder("bad")
    x = xe.Parameter(b, 0, xe.Shape("f32", (6, 2)), "x")
    _raises(lambda: xe.AllGather(x, 2, 2), "AllGather", "all_gather_dim=2", "f32[6,2]")
    _raises(lambda: xe.AllGather(x, 0, 3, replica_groups=[[0, 1]]), "AllGather", "shard_count=3", "2 members")
    _raises(lambda: xe.AllGather(x, 0, replica_groups=[[0, 1], [2]]), "AllGather", "different sizes")
    _raises(lambda: xe.AllGather(x, 0), "AllGather", "shard_count is needed")
    _raises(lambda: xe.ReduceScatter(x, add, 0, 4), "ReduceScatter", "size 6", "shard_count=4")
    _raises(lambda: xe.ReduceScatter(x, add, -1, 2), "ReduceScatter", "scatter_dimension=-1")
    _raises(lambda: xe.ReduceScatter(x, add, 0, 2, replica_groups=[[0, 1, 2]]), "ReduceScatter", "3 members")


def test_shape_rules_all_to_all_and_permute():
    b = xe.XlaBuilder("bad")
    x = xe.Parameter(b, 0, xe.Shape("f32", (6, 2)), "x")
    y = xe.Parameter(b, 1, xe.Shape("f32", (3,)), "y")
    _raises(lambda: xe.AllToAll(x, 1, 0, 4), "AllToAll", "size 2", "split_count=4")
    _raises(lambda: xe.AllToAll(x, 2, 0, 2), "AllToAll", "split_dimension=2")
    _raises(lambda: xe.AllToAll(x, 0, 5, 2), "AllToAll", "concat_dimension=5")
    _raises(lambda: xe.AllToAll(x, 0, 0, 3, replica_groups=[[0, 1]]), "AllToAll", "split_count=3")
    _raises(lambda: xe.AllToAllTuple([x, y]), "AllToAll", "one shape", "f32[3]")
    _raises(lambda: xe.AllToAllTuple([x, x], replica_groups=[[0, 1, 2]]), "AllToAll",
            "one operand per group member (3)")
    _raises(lambda: xe.CollectivePermute(x, [(0, 1), (0, 2)]), "CollectivePermute", "source 0 appears in two")
    _raises(lambda: xe.CollectivePermute(x, [(0, 1), (2, 1)]), "CollectivePermute", "target 1 appears in two")
    _raises(lambda: xe.CollectivePermute(x, [(0, 1, 2)]), "CollectivePermute", "(source, target)")
    _raises(lambda: xe.CollectivePermute(x, [(0, -1)]), "CollectivePermute", "negative")


def test_shape_rules_channels():
    b = xe.XlaBuilder("bad")
    x = xe.Parameter(b, 0, xe.Shape("f32", (2,)), "x")
    tok = xe.AfterAll(b)
    _raises(lambda: xe.InfeedWithToken(x, "f32[2]"), "Infeed", "token[]", "f32[2]")
    _raises(lambda: xe.InfeedWithToken(tok, "((f32[2], s32[]), f32[])"), "Infeed", "nested tuples")
    _raises(lambda: xe.OutfeedWithToken(x, tok, "f32[3]"), "Outfeed", "f32[3]", "f32[2]")
    _raises(lambda: xe.SendWithToken(xe.Tuple(x), tok, 1), "Send", "must be an array")
    _raises(lambda: xe.RecvWithToken(tok, "(f32[2])", 1), "Recv", "must be an array shape")


# -- run-time errors: named, and never a hang ------------------------------------------------------

def test_groups_naming_missing_replicas():
    comp = build(lambda x: xe.AllReduce(x, add, [[0, 5]]), "f32[]")
    with pytest.raises(ExecutionError, match=r"AllReduce: replica_groups=\{\{0,5\}\} names replica ids \[5\]"):
        comp.run_replicated([[F32(1)], [F32(2)]])
    comp = build(lambda x: xe.AllReduce(x, add, [[0]]), "f32[]")
    with pytest.raises(ExecutionError, match="replica 1 is in no group"):
        comp.run_replicated([[F32(1)], [F32(2)]])
    with pytest.raises(ExecutionError, match="run_replicated"):
        build(lambda x: xe.AllReduce(x, add, [[0, 1]]), "f32[]").run(F32(1))


def test_a_failing_device_releases_the_others(monkeypatch):
    # how each device left its collective: released (BrokenBarrierError), not by waiting
    # out the rendezvous timeout (an ExecutionError "waited ... s") -- no clock involved
    left = {}
    exchange = Rendezvous.exchange

    def watched(self, key, device, value, participants=None):
        try:
            return exchange(self, key, device, value, participants)
        except BaseException as e:
            left[device] = type(e)
            raise
    monkeypatch.setattr(Rendezvous, "exchange", watched)
    comp = build(lambda x: xe.AllReduce(x, add), "f32[2]")
    with pytest.raises(ExecutionError, match="argument 0"):
        comp.run_replicated([[F32([1, 2])], [F32([1, 2, 3])], [F32([1, 2])]])  # device 1's is wrong
    assert left == {0: threading.BrokenBarrierError, 2: threading.BrokenBarrierError}, left


def _devices(n, work, timeout=None):
    rdv = Rendezvous(n, timeout)
    errors = [None] * n

    def run(d):
        try:
            work(rdv, d)
        except Exception as e:  # noqa: BLE001
            errors[d] = e
        finally:
            rdv.done(d)

    threads = [threading.Thread(target=run, args=(d,)) for d in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads)
    return errors


def test_rendezvous_detects_devices_at_different_collectives():
    errors = _devices(2, lambda rdv, d: rdv.exchange(("all-reduce" if d == 0 else "all-gather", 1), d, d))
    assert all(isinstance(e, ExecutionError) and "waits forever" in str(e) for e in errors)


def test_rendezvous_detects_a_finished_device_and_times_out():
    errors = _devices(2, lambda rdv, d: rdv.exchange(("x", 1), d, d) if d == 0 else None)
    assert "already finished" in str(errors[0])
    # device 1 is still running (not finished) until device 0 has given up waiting for it
    gave_up = threading.Event()

    def work(rdv, d):
        if d == 1:
            assert gave_up.wait(60)
            return
        try:
            rdv.exchange(("x", 1), d, d)
        finally:
            gave_up.set()
    errors = _devices(2, work, timeout=0.1)
    assert "waited 0.1 s" in str(errors[0])


def test_rendezvous_subgroups_meet_separately():
    got = {}

    def work(rdv, d):
        group = (0, 2) if d % 2 == 0 else (1, 3)
        got[d] = rdv.exchange(("g", 1), d, d * 10, group)

    assert _devices(4, work) == [None] * 4
    assert got == {0: [0, 20], 2: [0, 20], 1: [10, 30], 3: [10, 30]}


# -- channels ------------------------------------------------------------------------------------

def test_infeed_outfeed_send_recv():
    def program(b):
        infeed = xe.InfeedWithToken(xe.AfterAll(b), "(f32[2], s32[])")
        data, tok = xe.GetTupleElement(infeed, 0), xe.GetTupleElement(infeed, 1)
        doubled = xe.Mul(xe.GetTupleElement(data, 0), xe.Constant(b, F32(2)))
        tok = xe.OutfeedWithToken(doubled, tok, None, "cfg")
        tok = xe.SendWithToken(doubled, tok, 7)
        received = xe.GetTupleElement(xe.RecvWithToken(tok, "f32[2]", 7), 0)
        return xe.Add(received, xe.Recv(b, "f32[2]", 8))

    b = xe.XlaBuilder("feeds")
    comp = round_trip(b.build(program(b)))
    text = comp.as_hlo_text()
    assert "outfeed_shape=f32[2]{0}, outfeed_config=\"cfg\"" in text and "send-done(" in text
    channels = {"infeed": [(F32([1, 2]), np.int32(5))], 8: [F32([10, 10])]}
    np.testing.assert_array_equal(comp.run(channels=channels), [12, 14])
    np.testing.assert_array_equal(channels["outfeed"][0], [2, 4])
    assert channels["infeed"] == [] and channels[7] == [] and channels[8] == []
    with pytest.raises(ExecutionError, match="Infeed: nothing to read"):
        comp.run()


def test_infeed_per_device_and_outfeed_by_device():
    b = xe.XlaBuilder("feeds")
    value = xe.Infeed(b, "s32[]")
    comp = b.build(xe.Outfeed(xe.Add(value, value)))
    channels = {"infeed": {0: [np.int32(1)], 1: [np.int32(2)]}}
    comp.run_replicated([[], []], channels=channels)
    assert {d: [int(v) for v in vs] for d, vs in channels["outfeed"].items()} == {0: [2], 1: [4]}


def test_send_recv_between_devices():
    b = xe.XlaBuilder("pingpong")
    x = xe.Parameter(b, 0, xe.Shape("s32", ()), "x")
    comp = b.build(xe.Conditional(
        xe.Eq(xe.ReplicaId(b), xe.Constant(b, np.uint32(0))),
        x, lambda v: xe.GetTupleElement(xe.Tuple(v, xe.Send(v, 3)), 0),
        x, lambda v: xe.Recv(v.builder, "s32[]", 3)))
    out = comp.run_replicated([[np.int32(42)], [np.int32(0)]])
    assert [int(o) for o in out] == [42, 42]


@pytest.mark.timeout(600)
def test_recv_with_no_sender_fails_fast(monkeypatch):
    b = xe.XlaBuilder("lonely")
    x = xe.Parameter(b, 0, xe.Shape("s32", ()), "x")
    comp = b.build(xe.Conditional(xe.Eq(xe.ReplicaId(b), xe.Constant(b, np.uint32(0))),
                                  x, lambda v: v, x, lambda v: xe.Recv(v.builder, "s32[]", 3)))
    # found when the other device finished, not by waiting out the timeout: with the
    # timeout an hour, a missed finish hangs (pytest-timeout fails it) instead of passing
    monkeypatch.setattr(Rendezvous, "DEFAULT_TIMEOUT", 3600.0)
    with pytest.raises(ExecutionError, match=r"RecvDone \(channel_id=3\): nothing to read"):
        comp.run_replicated([[np.int32(1)], [np.int32(2)]])


def test_hlo_text_forms():
    text = """HloModule m, replica_count=4

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY e {
  x = f32[2]{0} parameter(0)
  ar = f32[2]{0} all-reduce(x), replica_groups=[2,2]<=[4], to_apply=add
  rs = f32[1]{0} reduce-scatter(ar), replica_groups={{0,1},{2,3}}, dimensions={0}, to_apply=add
  ROOT ag = f32[4]{0} all-gather(rs), replica_groups={}, dimensions={0}
}
"""
    comp = round_trip(xe.parse_hlo(text))
    assert "replica_groups={{0,1},{2,3}}, to_apply=add" in comp.as_hlo_text()
    out = comp.run_replicated([[F32([d, 10 * d])] for d in range(4)])
    # pairs sum ([1, 10] and [5, 50]); each pair sums again and scatters; all 4 gather
    for o in out:
        np.testing.assert_array_equal(o, [2, 20, 10, 100])
    bad = text.replace("replica_groups={{0,1},{2,3}}, dimensions={0}", "replica_groups={}, dimensions={0}")
    with pytest.raises(ExecutionError, match="ReduceScatter: the group has 4 devices but the result f32.1. expects 2"):
        xe.parse_hlo(bad).run_replicated([[F32([d, 10 * d])] for d in range(4)])


# -- partitioned (SPMD) modules ------------------------------------------------------------------

SHARDY_2D = """HloModule jit_f, entry_computation_layout={(f32[4,6]{1,0})->(f32[4,6]{1,0}, f32[4,6]{1,0}, s32[4]{0})}, frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<["x"=2, "y"=2]>}}

region_0.1 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT add.1 = f32[] add(a, b)
}

body.2 {
  p = f32[2,3]{1,0} parameter(0)
  psum = f32[2,3]{1,0} all-reduce(p), channel_id=1, replica_groups={{0,1},{2,3}}, use_global_device_ids=true, to_apply=region_0.1
  ag = f32[4,3]{1,0} all-gather(p), channel_id=2, replica_groups={{0,2},{1,3}}, dimensions={0}, use_global_device_ids=true
  pid = u32[] partition-id()
  c2 = u32[] constant(2)
  y = u32[] remainder(pid, c2)
  ys = s32[] convert(y)
  r = s32[1]{0} reshape(ys)
  ROOT t = (f32[2,3]{1,0}, f32[4,3]{1,0}, s32[1]{0}) tuple(psum, ag, r)
}

ENTRY main.3 {
  a.1 = f32[4,6]{1,0} parameter(0), sharding={devices=[2,2]<=[4]}
  s.14 = f32[2,3]{1,0} custom-call(a.1), custom_call_target="xla.sdy.GlobalToLocalShape", custom_call_has_side_effect=true, frontend_attributes={xla.sdy.in_shardings="#sdy.sharding_per_value<[<@mesh, [{\\"x\\"}, {\\"y\\"}]>]>",xla.sdy.manual_axes="#sdy<manual_axes{\\"x\\", \\"y\\"}>"}
  s.15 = (f32[2,3]{1,0}, f32[4,3]{1,0}, s32[1]{0}) call(s.14), to_apply=body.2
  s.16 = f32[2,3]{1,0} get-tuple-element(s.15), index=0
  s.17 = f32[4,3]{1,0} get-tuple-element(s.15), index=1
  s.18 = s32[1]{0} get-tuple-element(s.15), index=2
  s.19 = (f32[4,6]{1,0}, f32[4,6]{1,0}, s32[4]{0}) custom-call(s.16, s.17, s.18), custom_call_target="xla.sdy.LocalToGlobalShape", custom_call_has_side_effect=true, frontend_attributes={xla.sdy.manual_axes="#sdy<manual_axes{\\"x\\", \\"y\\"}>",xla.sdy.out_shardings="#sdy.sharding_per_value<[<@mesh, [{\\"x\\"}, {\\"y\\"}]>, <@mesh, [{}, {\\"y\\"}]>, <@mesh, [{\\"x\\", \\"y\\"}]>]>"}
  g0 = f32[4,6]{1,0} get-tuple-element(s.19), index=0
  g1 = f32[4,6]{1,0} get-tuple-element(s.19), index=1
  g2 = s32[4]{0} get-tuple-element(s.19), index=2
  ROOT tuple.3 = (f32[4,6]{1,0}, f32[4,6]{1,0}, s32[4]{0}) tuple(g0, g1, g2), sharding={{devices=[2,2]<=[4]}, {devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}, {devices=[4]<=[4]}}
}
"""


def _shardy_2d_expected(a):
    blocks = a.reshape(2, 2, 2, 3).transpose(0, 2, 1, 3)  # [x, y] -> the f32[2,3] shard of device 2x+y
    psum = np.concatenate([np.concatenate([blocks[x, 0] + blocks[x, 1]] * 2, axis=1) for x in range(2)], axis=0)
    gathered = a  # all-gather over x of the y-th column block: the full array, replicated over x
    return psum, gathered, np.array([0, 1, 0, 1], np.int32)


def test_spmd_shardy_2d_mesh_global_and_per_device():
    comp = xe.parse_hlo(SHARDY_2D)
    assert spmd.is_partitioned(comp) and spmd.num_partitions(comp) == 4
    a = np.arange(24, dtype=F32).reshape(4, 6)
    want = _shardy_2d_expected(a)
    got = comp.run(a)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w)
    shards = [[a[2 * (d // 2):2 * (d // 2) + 2, 3 * (d % 2):3 * (d % 2) + 3]] for d in range(4)]
    per_device = comp.run_replicated(shards)
    for d in range(4):
        x, y = divmod(d, 2)
        np.testing.assert_allclose(per_device[d][0], want[0][2 * x:2 * x + 2, 3 * y:3 * y + 3])
        np.testing.assert_allclose(per_device[d][1], a[:, 3 * y:3 * y + 3])
        np.testing.assert_array_equal(per_device[d][2], [y])


GSPMD = """HloModule jit_g, entry_computation_layout={(f32[4,3]{1,0})->(f32[4,3]{1,0}, f32[4,3]{1,0})}

body.1 {
  p = f32[1,3]{1,0} parameter(0)
  ag = f32[4,3]{1,0} all-gather(p), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true
  pp = f32[1,3]{1,0} collective-permute(p), channel_id=2, source_target_pairs={{0,3},{3,0},{1,2},{2,1}}
  ROOT t = (f32[4,3]{1,0}, f32[1,3]{1,0}) tuple(ag, pp)
}

ENTRY main.2 {
  a.1 = f32[4,3]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}
  s.9 = f32[4,3]{1,0} custom-call(a.1), custom_call_target="Sharding", sharding={devices=[4,1]<=[4]}
  s.10 = f32[1,3]{1,0} custom-call(s.9), custom_call_target="SPMDFullToShardShape", sharding={manual}
  s.11 = (f32[4,3]{1,0}, f32[1,3]{1,0}) call(s.10), to_apply=body.1
  s.12 = f32[4,3]{1,0} get-tuple-element(s.11), index=0
  s.14 = f32[4,3]{1,0} custom-call(s.12), custom_call_target="Sharding", sharding={manual}
  s.15 = f32[4,3]{1,0} custom-call(s.14), custom_call_target="SPMDShardToFullShape", sharding={replicated}
  s.13 = f32[1,3]{1,0} get-tuple-element(s.11), index=1
  s.16 = f32[1,3]{1,0} custom-call(s.13), custom_call_target="Sharding", sharding={manual}
  s.17 = f32[4,3]{1,0} custom-call(s.16), custom_call_target="SPMDShardToFullShape", sharding={devices=[4,1]<=[4]}
  ROOT tuple.3 = (f32[4,3]{1,0}, f32[4,3]{1,0}) tuple(s.15, s.17), sharding={{replicated}, {devices=[4,1]<=[4]}}
}
"""


def test_spmd_gspmd_custom_calls():
    comp = round_trip(xe.parse_hlo(GSPMD))
    assert spmd.num_partitions(comp) == 4
    a = np.arange(12, dtype=F32).reshape(4, 3)
    gathered, permuted = comp.run(a)
    np.testing.assert_array_equal(gathered, a)
    np.testing.assert_array_equal(permuted, a[[3, 2, 1, 0]])
    per_device = comp.run_replicated([[a[d:d + 1]] for d in range(4)])
    for d in range(4):
        np.testing.assert_array_equal(per_device[d][0], a)
        np.testing.assert_array_equal(per_device[d][1], a[[3, 2, 1, 0]][d:d + 1])


def test_hlo_shardings():
    t = spmd.parse_hlo_sharding("{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}")
    assert t.tiles == (1, 2) and [t.tile_index(d) for d in range(4)] == [(0, 0), (0, 1), (0, 0), (0, 1)]
    t = spmd.parse_hlo_sharding("{devices=[2,2]0,2,1,3}")
    assert [t.tile_index(d) for d in range(4)] == [(0, 0), (1, 0), (0, 1), (1, 1)]
    t = spmd.parse_hlo_sharding("{devices=[2,1,2]<=[4] last_tile_dims={manual}}")
    assert t.rank == 2 and t.tiles == (2, 1)
    tup = spmd.parse_hlo_sharding("{{replicated}, {devices=[4]<=[4]}, {manual}}")
    assert len(tup) == 3 and tup[2] is None
    assert spmd.resolve(tup[0], 1, 4).is_replicated
    x = np.arange(10)
    t = spmd.parse_hlo_sharding("{devices=[4]<=[4]}")
    shards = [t.shard(x, d) for d in range(4)]  # uneven: padded with zeros, as XLA pads
    np.testing.assert_array_equal(shards[3], [9, 0, 0])
    np.testing.assert_array_equal(t.join(shards, xe.Shape("s64", (10,))), x)


def test_sdy_meshes_and_shardings():
    meshes = spmd.parse_meshes('{mesh = #sdy.mesh<["x"=2, "y"=4], device_ids=[7,6,5,4,3,2,1,0]>, '
                               'm1 = #sdy.mesh<["i"=4]>}')
    mesh = meshes["mesh"]
    assert mesh.axes == [("x", 2), ("y", 4)] and meshes["m1"].size == 4
    (name, dims), = spmd.parse_sdy_shardings('#sdy.sharding<@mesh, [{"y", "x"}, {}]>')
    t = spmd.sdy_tiling(mesh, dims)
    assert t.tiles == (8, 1)
    # device 7 sits at mesh (x=0, y=0); device 6 at (0, 1): y is major on dimension 0
    assert t.tile_index(7) == (0, 0) and t.tile_index(6) == (2, 0) and t.tile_index(3) == (1, 0)
    (name, dims), = spmd.parse_sdy_shardings('#sdy.sharding<@mesh, [{"y":(2)2}, {"x"}]>')
    t = spmd.sdy_tiling(mesh, dims)
    assert t.tiles == (2, 2)
    # "y":(2)2 is the minor half of y (y = 2 * major + minor); the major half makes copies
    assert t.tile_index(7) == (0, 0) and t.tile_index(6) == (1, 0) and t.tile_index(5) == (0, 0)
    assert t.tile_index(3) == (0, 1) and t.devices.shape[-1] == 2


def test_partitioned_module_needs_the_simulation():
    comp = xe.parse_hlo(GSPMD)
    from xla_explorer.executors.reference import ExecutionContext, run
    with pytest.raises(ExecutionError, match="partitioned"):
        run(comp, [np.zeros((4, 3), F32)], ctx=ExecutionContext())
