"""Collectives and channels: AllReduce, CrossReplicaSum, AllGather, AllToAll,
CollectivePermute, ReduceScatter, CollectiveBroadcast, ReplicaId, PartitionId; Infeed,
Outfeed, Send, Recv (and their ``-done`` halves).

Every device runs the same program.  Here devices are threads (``comp.run_replicated``,
or ``comp.run`` of a partitioned module, see ``executors.spmd``); a collective's
reference gives its operand to the ``Rendezvous`` and gets the values of the other
devices of its group back.  Device ``d`` is replica ``d // num_partitions``, partition
``d % num_partitions``.

Who meets whom: ``replica_groups`` lists groups of ids (empty: one group of all); what
an id means is XLA's ``CollectiveOpGroupMode``, chosen by ``channel_id`` and
``use_global_device_ids``:

====================  =====================  ===========================================
channel_id            use_global_device_ids  the ids in replica_groups are ...
====================  =====================  ===========================================
absent                absent / false         replica ids; each partition on its own
present               (op has no such flag)  partition ids; each replica on its own
present               false                  replica ids; all partitions of them together
present               true                   device ids ``replica * num_partitions + partition``
====================  =====================  ===========================================

AllReduce, AllGather and ReduceScatter have the flag (absent = false); AllToAll,
CollectivePermute and CollectiveBroadcast do not.  The order of a group is the order
in which AllGather concatenates, AllToAll sends and ReduceScatter hands out blocks.

Channels are simulated host queues in ``ctx.channels`` (``comp.run(..., channels=...)``):
``"infeed"`` is a list that Infeed pops from the front (or ``{device: list}``), Outfeed
appends to ``"outfeed"`` (with several devices: ``{device: list}``), and Send/Recv use
the list ``channels[channel_id]``: a Send appends, a RecvDone pops (waiting for another
device's Send).

Simplifications against XLA: a reduction combines the group's values left to right in
group order (XLA leaves the order open); Send/Recv pair by channel id alone (the
``_xla_send_recv_source_target_pairs`` frontend attribute is not read); the in-place
form of collective-permute and the async ``*-start``/``*-done`` pairs are not modelled.
"""
import threading
import time

import numpy as np

from ..builder import XlaOp, apply_op
from ..coerce import as_int, as_int_list, as_int_lists
from ..errors import ExecutionError, HloParseError, ShapeError
from ..hlo.attrs import REQUIRED, Attr, parse_ints
from ..shapes import Shape, as_shape
from .arguments import describe
from . import registry

_U32 = Shape("u32", ())


# -- attribute codecs ------------------------------------------------------------------------

class _OneDimension:
    """``dimensions={d}`` <-> one dimension number (AllGather, AllToAll, ReduceScatter)."""

    hlo = "dimensions"

    def __init__(self, kw, default=REQUIRED):
        self.kw, self.kws, self.default = kw, (kw,), default
        self.arg_kinds = {kw: "dim"}

    def parse(self, raw, resolve):
        dims = parse_ints(raw)
        if len(dims) != 1:
            raise HloParseError(f"dimensions={raw}: expected exactly one dimension")
        return {self.kw: dims[0]}

    def missing(self):
        return None if self.default is REQUIRED else {self.kw: self.default}

    def coerce(self, attrs, op):
        if attrs.get(self.kw) is not None:
            attrs[self.kw] = as_int(op, self.kw, attrs[self.kw])

    def format(self, attrs, inst, name_of):
        v = attrs.get(self.kw)
        return None if v is None else "{" + str(int(v)) + "}"


class _ShapeAttr:
    """``outfeed_shape=(f32[2]{0}, s32[])`` <-> a Shape."""

    def __init__(self, kw, hlo):
        self.kw, self.hlo, self.kws = kw, hlo, (kw,)
        self.arg_kinds = {kw: "shape"}

    def parse(self, raw, resolve):
        try:
            return {self.kw: Shape.parse(raw)}
        except ShapeError as e:
            raise HloParseError(f"{self.hlo}={raw}: {e}") from None

    def missing(self):
        return None

    def coerce(self, attrs, op):
        if attrs.get(self.kw) is not None and not isinstance(attrs[self.kw], Shape):
            raise ShapeError(f"{op}: {self.kw} must be a Shape, got {attrs[self.kw]!r}")

    def format(self, attrs, inst, name_of):
        v = attrs.get(self.kw)
        return None if v is None else v.to_string(layout=True)


def _channel_attrs():
    return (Attr("channel_id", "int", default=None),
            Attr("replica_groups", "int_lists", default=(), always_print=True))


# -- shared shape checks ---------------------------------------------------------------------

def _fmt_groups(groups):
    return "{" + ",".join("{" + ",".join(map(str, g)) + "}" for g in groups) + "}"


def _check_arrays(op, shapes):
    # the operands are arrays (a tuple operand is given as its elements)
    if not shapes:
        raise ShapeError(f"{op}: needs at least one operand")
    for i, s in enumerate(shapes):
        if not s.is_array:
            raise ShapeError(f"{op}: operand {i} must be an array, got {s}")


def _check_groups(op, replica_groups, uniform):
    """Each id in one group at most, groups non-empty, ids >= 0; equal sizes if ``uniform``."""
    seen = set()
    for g in replica_groups:
        if len(g) == 0:
            raise ShapeError(f"{op}: replica_groups={_fmt_groups(replica_groups)} has an empty group")
        for i in g:
            if int(i) < 0:
                raise ShapeError(f"{op}: replica_groups={_fmt_groups(replica_groups)} has a negative id {i}")
            if i in seen:
                raise ShapeError(f"{op}: replica_groups={_fmt_groups(replica_groups)} names id {i} twice; "
                                 "each id belongs to one group at most")
            seen.add(i)
    if uniform and len({len(g) for g in replica_groups}) > 1:
        raise ShapeError(f"{op}: the groups of replica_groups={_fmt_groups(replica_groups)} have different "
                         "sizes; they must all be of one size")


def _check_mode(op, channel_id, use_global_device_ids, replica_groups):
    """XLA's CollectiveOpGroupMode rules for the flag and the channel."""
    if channel_id is not None and int(channel_id) < 0:
        raise ShapeError(f"{op}: channel_id={channel_id} must be non-negative")
    if use_global_device_ids:
        if channel_id is None:
            raise ShapeError(f"{op}: use_global_device_ids=true needs a channel_id (XLA refuses the "
                             "combination: without a channel the ids are replica ids)")
        if not replica_groups:
            raise ShapeError(f"{op}: use_global_device_ids=true needs explicit replica_groups of device ids")


def _check_dimension(op, name, d, shape, i=0):
    if not 0 <= d < shape.rank:
        raise ShapeError(f"{op}: {name}={d} is out of range for operand {i} {shape} of rank {shape.rank}; "
                         f"it must be in [0, {shape.rank})")


def _check_reducer(op, computation, shapes):
    """The computation takes two T[] scalars and returns a T[] scalar, T each operand's type."""
    for i, s in enumerate(shapes):
        scalar = Shape(s.element_type, ())
        params = computation.parameter_shapes
        if len(params) != 2 or any(p != scalar for p in params) or computation.result_shape != scalar:
            raise ShapeError(f"{op}: the computation {computation.name} is {computation.signature()} but "
                             f"operand {i} ({s}) needs ({scalar}, {scalar}) -> {scalar}")


def _reducer_params(op):
    def params(kw, shapes, attrs, index=None):
        """A Python computation is traced on two scalars of operand 0's type."""
        _check_arrays(op, shapes)
        scalar = Shape(shapes[0].element_type, ())
        return [scalar, scalar]
    return params


def _result(shapes):
    return shapes[0] if len(shapes) == 1 else Shape.tuple(shapes)


def _group_size(op, replica_groups, count, count_name, per_replica_group=False):
    """The number of devices in every group: the size of the groups, or ``count`` (the op's
    shard/split count) when they are empty.  ``per_replica_group``: the groups list
    replicas whose partitions all take part (channel_id without use_global_device_ids),
    so a group of k replicas is k * num_partitions devices."""
    if replica_groups:
        size = len(replica_groups[0])
        if count is None:
            return size
        if int(count) != size and not (per_replica_group and int(count) % size == 0):
            raise ShapeError(f"{op}: {count_name}={count} but the groups of replica_groups="
                             f"{_fmt_groups(replica_groups)} have {size} members; they must be equal")
        return int(count)
    if count is not None and int(count) < 1:
        raise ShapeError(f"{op}: {count_name}={count} must be at least 1")
    return None if count is None else int(count)


# -- who meets whom (run time) ---------------------------------------------------------------

def _group_mode(channel_id, use_global_device_ids):
    """XLA's CollectiveOpGroupMode; ``use_global_device_ids`` None: the op has no such flag."""
    if channel_id is None:
        return "cross_replica"
    if use_global_device_ids is None:
        return "cross_partition"
    return "flattened_id" if use_global_device_ids else "cross_replica_and_partition"


_ID_NAME = {"cross_replica": "replica", "cross_partition": "partition",
            "cross_replica_and_partition": "replica", "flattened_id": "device"}


def _domain(ctx, mode):
    """(this device's id, the number of ids) in the id space of ``mode``."""
    if mode == "cross_partition":
        return ctx.partition_id, ctx.num_partitions
    if mode == "flattened_id":
        return ctx.device_id, ctx.num_devices
    return ctx.replica_id, ctx.num_replicas


def _devices(ctx, mode, ids):
    """Device numbers of the ids of a group (in group order)."""
    r, p, P = ctx.replica_id, ctx.partition_id, ctx.num_partitions
    if mode == "cross_replica":
        return [i * P + p for i in ids]
    if mode == "cross_partition":
        return [r * P + i for i in ids]
    if mode == "cross_replica_and_partition":
        return [i * P + q for i in ids for q in range(P)]
    return list(ids)


def _check_ids(op, ctx, mode, ids, what):
    me, count = _domain(ctx, mode)
    bad = sorted({int(i) for i in ids if not 0 <= int(i) < count})
    if bad:
        raise ExecutionError(f"{op}: {what} names {_ID_NAME[mode]} ids {bad}, but this run has {count} "
                             f"{_ID_NAME[mode]}s ({ctx.num_replicas} replicas x {ctx.num_partitions} "
                             f"partitions); run it with comp.run_replicated on more devices")


def _participants(op, ctx, replica_groups, mode):
    """The devices of this device's group, in group order."""
    me, count = _domain(ctx, mode)
    groups = [list(g) for g in replica_groups] or [list(range(count))]
    _check_ids(op, ctx, mode, [i for g in groups for i in g], f"replica_groups={_fmt_groups(groups)}")
    mine = [g for g in groups if me in g]
    if not mine:
        raise ExecutionError(f"{op}: {_ID_NAME[mode]} {me} is in no group of replica_groups="
                             f"{_fmt_groups(groups)}; every {_ID_NAME[mode]} must be in one")
    return _devices(ctx, mode, mine[0])


def _exchange(op, ctx, devices, value):
    """Give ``value`` to the group; every member's value, in group order."""
    key = ctx.next_key((op, tuple(devices)))
    return ctx.rendezvous.exchange(key, ctx.device_id, value, devices)


def _combine(computation, a, b, shape):
    """``computation(a, b)`` at every index: on whole arrays when it is element-wise."""
    if getattr(computation, "is_elementwise", False):
        try:
            out = np.asarray(computation(a, b))
            if out.shape == tuple(shape.dims):
                return out.astype(shape.dtype, copy=False)
        except ExecutionError:
            pass  # fall back to the loop below, which calls it as the spec does, on scalars
    out = np.empty(shape.dims, shape.dtype)
    for index in np.ndindex(*shape.dims):
        out[index] = computation(a[index], b[index])
    return out


def _all_reduce_values(values, computation, shape):
    """f(...f(f(v_0, v_1), v_2)..., v_{n-1}) in group order."""
    acc = np.asarray(values[0])
    for v in values[1:]:
        acc = _combine(computation, acc, np.asarray(v), shape)
    return acc


def _shapes(shape):
    return list(shape.tuple_shapes) if shape.is_tuple else [shape]


def _pack(values, shape):
    return tuple(values) if shape.is_tuple else values[0]


def _operand_list(op, operand):
    """A tuple operand as its elements (as XlaBuilder does), a list as it is."""
    if isinstance(operand, (list, tuple)):
        return list(operand)
    if isinstance(operand, XlaOp) and operand.shape.is_tuple:
        from .control import GetTupleElement
        return [GetTupleElement(operand, i) for i in range(len(operand.shape.tuple_shapes))]
    return [operand]


# -- ReplicaId / PartitionId -----------------------------------------------------------------

def ReplicaId(builder):
    """Wraps XLA's ReplicaId: this replica's id, a ``u32[]`` scalar in ``[0, num_replicas)``.

    Every replica runs the same program, so ReplicaId is the one value that differs::

        comp = b.build(xe.ReplicaId(b)); comp.run_replicated([[], [], []])  # -> [0, 1, 2]
    """
    return apply_op("replica-id", [], {}, builder=builder)


def PartitionId(builder):
    """Wraps XLA's PartitionId: this partition's id, a ``u32[]`` scalar in
    ``[0, num_partitions)`` (what ``jax.lax.axis_index`` lowers to under shard_map)."""
    return apply_op("partition-id", [], {}, builder=builder)


def _id_shape_rule():
    return _U32


registry.register("replica-id", "ReplicaId", "collective", _id_shape_rule,
                  lambda *, shape, ctx: np.uint32(ctx.replica_id), needs_context=True,
                  categories=("collective",))
registry.register("partition-id", "PartitionId", "collective", _id_shape_rule,
                  lambda *, shape, ctx: np.uint32(ctx.partition_id), needs_context=True,
                  categories=("collective",))


# -- AllReduce / CrossReplicaSum -------------------------------------------------------------

def AllReduce(operand, computation, replica_groups=(), channel_id=None, shape_with_layout=None,
              use_global_device_ids=False, *, replica_group_ids=None):
    """Wraps XLA's AllReduce: combine ``operand`` across the devices of each group with
    ``computation`` (two scalars -> one scalar); every member gets the result::

        result = computation(...computation(operand@g[0], operand@g[1])..., operand@g[n-1])

    ``operand`` may be a tuple (or a list) of arrays: each is reduced, the result is a tuple.
    With 2 replicas holding ``[1.0, 2.5]`` and ``[3.0, 5.25]`` and an add computation,
    both get ``[4.0, 7.75]``.  ``replica_groups``, ``channel_id`` and
    ``use_global_device_ids`` choose who meets (see the module docstring)."""
    attrs = {"computation": computation, "replica_groups": _groups(replica_groups, replica_group_ids),
             "channel_id": _channel(channel_id), "use_global_device_ids": use_global_device_ids}
    return apply_op("all-reduce", _operand_list("AllReduce", operand), attrs)


def _groups(replica_groups, replica_group_ids=None):
    """``replica_groups`` as a tuple of tuples.  ``replica_group_ids`` is the older form
    (one group id per replica: ``{0, 1, 0, 1}`` means groups ``{0, 2}`` and ``{1, 3}``)."""
    if replica_group_ids is not None and len(replica_group_ids):
        if all(isinstance(g, (list, tuple)) for g in replica_group_ids):
            replica_groups = replica_group_ids  # the newer page calls the list of lists so too
        else:
            ids = as_int_list("replica_group_ids", "replica_group_ids", replica_group_ids)
            replica_groups = [[r for r, g in enumerate(ids) if g == gid] for gid in sorted(set(ids))]
    if replica_groups is None:
        return ()
    return as_int_lists("replica_groups", "replica_groups", replica_groups)


def _channel(channel_id):
    """A channel id (an int, or a ChannelHandle-like object with ``.handle``), or None."""
    return None if channel_id is None else as_int("channel", "channel_id", getattr(channel_id, "handle", channel_id))


def _all_reduce_shape_rule(*operands, computation, replica_groups=(), channel_id=None,
                           use_global_device_ids=False):
    _check_arrays("AllReduce", operands)                                    # all_reduce_c1
    _check_groups("AllReduce", replica_groups, uniform=False)               # all_reduce_c2
    _check_mode("AllReduce", channel_id, use_global_device_ids, replica_groups)  # all_reduce_c3
    _check_reducer("AllReduce", computation, operands)                      # all_reduce_c4
    return _result(list(operands))


def _all_reduce_reference(*operands, shape, ctx, computation, replica_groups=(), channel_id=None,
                          use_global_device_ids=False):
    mode = _group_mode(channel_id, bool(use_global_device_ids))
    devices = _participants("AllReduce", ctx, replica_groups, mode)
    everyone = _exchange("all-reduce", ctx, devices, operands)
    return _pack([_all_reduce_values([v[i] for v in everyone], computation, s)
                  for i, s in enumerate(_shapes(shape))], shape)


registry.register("all-reduce", "AllReduce", "collective", _all_reduce_shape_rule, _all_reduce_reference,
                  attrs=_channel_attrs() + (Attr("use_global_device_ids", "bool", default=False),
                                            Attr("computation", "computation", hlo="to_apply")),
                  computation_params=_reducer_params("AllReduce"), needs_context=True, categories=("collective",))
describe("all-reduce", shape_with_layout={"kind": "skip"},
         example={"operand": "f32[2,3]", "computation": "Add", "replica_groups": [[0, 1]]})


def CrossReplicaSum(operand, replica_groups=(), *, replica_group_ids=None):
    """Wraps XLA's CrossReplicaSum: AllReduce with addition (``or`` for pred); records an
    ``all-reduce``.  Two replicas holding ``[1.0, 2.5]`` and ``[3.0, 5.25]`` both get
    ``[4.0, 7.75]``."""
    from .. import ops
    first = _operand_list("CrossReplicaSum", operand)[0]
    element_type = first.shape.element_type if isinstance(first, XlaOp) else Shape.of(first).element_type
    add = ops.Or if element_type == "pred" else ops.Add
    return AllReduce(operand, lambda a, b: add(a, b), _groups(replica_groups, replica_group_ids))


# -- AllGather -------------------------------------------------------------------------------

def AllGather(operand, all_gather_dim=None, shard_count=None, replica_groups=(), channel_id=None,
              layout=None, use_global_device_ids=False, *, all_gather_dimension=None, replica_group_ids=None):
    """Wraps XLA's AllGather: concatenate the operands of the devices of each group along
    ``all_gather_dim``, in group order; every member gets the whole::

        result = Concatenate(operand@g[0], ..., operand@g[shard_count-1], dimension=all_gather_dim)

    ``shard_count`` is the group size (needed when ``replica_groups`` is empty).  Two
    replicas holding ``[1.0, 2.5]`` and ``[3.0, 5.25]`` both get ``[1.0, 2.5, 3.0, 5.25]``.
    HLO prints ``all_gather_dim`` as ``dimensions={d}``."""
    d = all_gather_dim if all_gather_dim is not None else all_gather_dimension
    if d is None:
        raise ShapeError("AllGather: all_gather_dim is required")
    attrs = {"all_gather_dim": d, "replica_groups": _groups(replica_groups, replica_group_ids),
             "channel_id": _channel(channel_id),
             "use_global_device_ids": use_global_device_ids}
    if shard_count is not None:
        attrs["shard_count"] = as_int("AllGather", "shard_count", shard_count, minimum=1)
    return apply_op("all-gather", _operand_list("AllGather", operand), attrs)


def _counts_from_shape(op, operands, shape, dim, grow):
    """The shard count an HLO result shape implies (HLO text does not print it)."""
    if shape is None:
        return None
    result = _shapes(shape)
    for o, r in zip(operands, result):
        if o.is_array and r.is_array and o.rank == r.rank and 0 <= dim < o.rank:
            a, b = (r.dims[dim], o.dims[dim]) if grow else (o.dims[dim], r.dims[dim])
            if b:
                if a % b:
                    raise ShapeError(f"{op}: the result {r} is not the operand {o} with dimension {dim} "
                                     "multiplied by a whole shard count")
                return a // b
    return None


def _all_gather_shape_rule(*operands, all_gather_dim, replica_groups=(), channel_id=None,
                           use_global_device_ids=False, shard_count=None, shape=None):
    _check_arrays("AllGather", operands)                                    # all_gather_c1
    for i, s in enumerate(operands):
        _check_dimension("AllGather", "all_gather_dim", all_gather_dim, s, i)  # all_gather_c2
    _check_groups("AllGather", replica_groups, uniform=True)                # all_gather_c3
    _check_mode("AllGather", channel_id, use_global_device_ids, replica_groups)  # all_gather_c4
    if shard_count is None:  # HLO text: the result shape says it
        shard_count = _counts_from_shape("AllGather", operands, shape, all_gather_dim, grow=True)
    n = _group_size("AllGather", replica_groups, shard_count, "shard_count",  # all_gather_c5
                    per_replica_group=channel_id is not None and not use_global_device_ids)
    if n is None:
        raise ShapeError("AllGather: shard_count is needed when replica_groups is empty (it is the "
                         "number of devices that each group has)")
    out = []
    for s in operands:
        dims = list(s.dims)
        dims[all_gather_dim] = None if dims[all_gather_dim] is None else dims[all_gather_dim] * n
        out.append(Shape(s.element_type, dims))
    return _result(out)


def _all_gather_reference(*operands, shape, ctx, all_gather_dim, replica_groups=(), channel_id=None,
                          use_global_device_ids=False, shard_count=None):
    mode = _group_mode(channel_id, bool(use_global_device_ids))
    devices = _participants("AllGather", ctx, replica_groups, mode)
    want = _shapes(shape)
    if want[0].dims[all_gather_dim] != len(devices) * operands[0].shape[all_gather_dim]:
        raise ExecutionError(f"AllGather: the group has {len(devices)} devices but the result {want[0]} "
                             f"expects {want[0].dims[all_gather_dim] // max(operands[0].shape[all_gather_dim], 1)}")
    everyone = _exchange("all-gather", ctx, devices, operands)
    return _pack([np.concatenate([v[i] for v in everyone], axis=all_gather_dim)
                  for i in range(len(operands))], shape)


registry.register("all-gather", "AllGather", "collective", _all_gather_shape_rule, _all_gather_reference,
                  attrs=_channel_attrs() + (_OneDimension("all_gather_dim"),
                                            Attr("use_global_device_ids", "bool", default=False)),
                  attrs_from_shape=lambda shape: {"shape": shape},
                  needs_context=True, categories=("collective",))
describe("all-gather", shard_count={"kind": "int", "minimum": 1}, layout={"kind": "skip"},
         example={"operand": "f32[2]", "all_gather_dim": 0, "replica_groups": [[0, 1]]})


# -- AllToAll --------------------------------------------------------------------------------

def AllToAll(operand, split_dimension, concat_dimension, split_count, replica_groups=(), channel_id=None):
    """Wraps XLA's AllToAll: each device splits ``operand`` into ``split_count`` blocks
    along ``split_dimension`` and sends block ``i`` to the ``i``-th device of its group;
    each device concatenates the blocks it receives, in group order, along
    ``concat_dimension``::

        result@g[j] = Concatenate(block_j(operand@g[0]), ..., block_j(operand@g[n-1]),
                                  dimension=concat_dimension)

    On 4 devices an ``f32[4,16]`` split along 1 and concatenated along 0 gives ``f32[16,4]``.
    Like XlaBuilder, this records an ``all-to-all`` (``dimensions={split_dimension}``,
    blocks concatenated along the same dimension) and, when ``concat_dimension`` differs,
    the reshape / transpose / reshape that moves the blocks; empty ``replica_groups``
    become ``{0, ..., split_count-1}``."""
    shape = operand.shape if isinstance(operand, XlaOp) else Shape.of(operand)
    if not shape.is_array:
        raise ShapeError(f"AllToAll: the operand must be an array, got {shape}; use AllToAllTuple")
    split_dimension = as_int("AllToAll", "split_dimension", split_dimension)
    concat_dimension = as_int("AllToAll", "concat_dimension", concat_dimension)
    _check_dimension("AllToAll", "concat_dimension", concat_dimension, shape)
    split_count = as_int("AllToAll", "split_count", split_count, minimum=1)
    groups = _groups(replica_groups) or (tuple(range(split_count)),)
    result = apply_op("all-to-all", [operand], {"split_dimension": split_dimension, "split_count": split_count,
                                                "replica_groups": groups, "channel_id": _channel(channel_id)})
    if split_dimension == concat_dimension:
        return result
    from .shape import Reshape, Transpose
    sizes, permutation = [], []
    for i, size in enumerate(shape.dims):
        sizes += [split_count, size // split_count] if i == split_dimension else [size]
    for i in range(shape.rank):
        if i == concat_dimension:
            permutation.append(split_dimension)  # the block axis goes before the concat axis
        permutation.append(i + 1 if i >= split_dimension else i)
    final = list(shape.dims)
    final[split_dimension] //= split_count
    final[concat_dimension] *= split_count
    return Reshape(Transpose(Reshape(result, sizes), permutation), final)


def AllToAllTuple(operands, replica_groups=(), channel_id=None):
    """Wraps XLA's AllToAllTuple: device ``i`` of a group sends its ``operands[j]`` to device
    ``j``; the result on device ``j`` is the tuple of what devices ``0..n-1`` sent it."""
    return apply_op("all-to-all", list(operands), {"replica_groups": _groups(replica_groups),
                                                   "channel_id": _channel(channel_id)})


def _all_to_all_shape_rule(*operands, split_dimension=None, replica_groups=(), channel_id=None,
                           split_count=None, shape=None):
    _check_arrays("AllToAll", operands)                                      # all_to_all_c1
    _check_groups("AllToAll", replica_groups, uniform=True)                  # all_to_all_c2
    _check_mode("AllToAll", channel_id, None, replica_groups)
    n = _group_size("AllToAll", replica_groups, split_count, "split_count")   # all_to_all_c3
    if split_dimension is None:  # the tuple form: one operand per member of the group
        if n is not None and len(operands) != n:
            raise ShapeError(f"AllToAll: the tuple form needs one operand per group member ({n}), "
                             f"got {len(operands)}")
        for i, s in enumerate(operands):
            if s != operands[0]:                                             # all_to_all_c4
                raise ShapeError(f"AllToAll: the tuple form needs operands of one shape; operand {i} "
                                 f"is {s}, operand 0 is {operands[0]}")
        return Shape.tuple(list(operands))
    if len(operands) != 1:
        raise ShapeError(f"AllToAll: with split_dimension the operand is one array, got {len(operands)}")
    s = operands[0]
    _check_dimension("AllToAll", "split_dimension", split_dimension, s)       # all_to_all_c5
    size = s.dims[split_dimension]
    if n is not None and size is not None and size % n:                       # all_to_all_c6
        raise ShapeError(f"AllToAll: dimension {split_dimension} of the operand {s} has size {size}, "
                         f"not divisible by split_count={n}")
    return s


def _all_to_all_reference(*operands, shape, ctx, split_dimension=None, replica_groups=(), channel_id=None,
                          split_count=None):
    devices = _participants("AllToAll", ctx, replica_groups, _group_mode(channel_id, None))
    me = devices.index(ctx.device_id)
    n = len(devices)
    everyone = _exchange("all-to-all", ctx, devices, operands)
    if split_dimension is None:
        if len(operands) != n:
            raise ExecutionError(f"AllToAll: the tuple form has {len(operands)} operands but the group "
                                 f"has {n} devices")
        return tuple(everyone[i][me] for i in range(n))
    d = split_dimension
    if operands[0].shape[d] % n:
        raise ExecutionError(f"AllToAll: dimension {d} of size {operands[0].shape[d]} does not split "
                             f"into {n} blocks (the group size)")
    blocks = [np.split(everyone[i][0], n, axis=d)[me] for i in range(n)]
    return np.concatenate(blocks, axis=d)


registry.register("all-to-all", "AllToAll", "collective", _all_to_all_shape_rule, _all_to_all_reference,
                  attrs=_channel_attrs() + (_OneDimension("split_dimension", default=None),),
                  needs_context=True, categories=("collective",))
describe("all-to-all", concat_dimension={"kind": "dim"}, split_count={"kind": "int", "minimum": 1},
         example={"operand": "f32[4,2]", "split_dimension": 0, "concat_dimension": 1, "split_count": 2})


# -- CollectivePermute -----------------------------------------------------------------------

def CollectivePermute(operand, source_target_pairs, channel_id=None):
    """Wraps XLA's CollectivePermute: for each pair ``(source, target)`` the operand of
    ``source`` becomes the result on ``target``; a device that is no target gets zeros::

        result@t = operand@s  if (s, t) in source_target_pairs  else 0

    No two pairs share a source or a target.  ``source_target_pairs=[(0, 1), (1, 2),
    (2, 0)]`` turns a ring.  The ids are replica ids, or partition ids with a
    ``channel_id``."""
    pairs = as_int_lists("CollectivePermute", "source_target_pairs", source_target_pairs)
    return apply_op("collective-permute", _operand_list("CollectivePermute", operand),
                    {"source_target_pairs": pairs, "channel_id": _channel(channel_id)})


def _collective_permute_shape_rule(*operands, source_target_pairs, channel_id=None):
    _check_arrays("CollectivePermute", operands)                                # collective_permute_c1
    _check_mode("CollectivePermute", channel_id, None, ())
    sources, targets = set(), set()
    for pair in source_target_pairs:
        if len(pair) != 2:                                                       # collective_permute_c2
            raise ShapeError(f"CollectivePermute: source_target_pairs has {list(pair)}; each pair is "
                             "(source, target)")
        s, t = pair
        if s < 0 or t < 0:
            raise ShapeError(f"CollectivePermute: source_target_pairs has a negative id in {list(pair)}")
        if s in sources:                                                         # collective_permute_c3
            raise ShapeError(f"CollectivePermute: source {s} appears in two pairs of source_target_pairs="
                             f"{_fmt_groups(source_target_pairs)}")
        if t in targets:                                                         # collective_permute_c4
            raise ShapeError(f"CollectivePermute: target {t} appears in two pairs of source_target_pairs="
                             f"{_fmt_groups(source_target_pairs)}")
        sources.add(s)
        targets.add(t)
    return _result(list(operands))


def _collective_permute_reference(*operands, shape, ctx, source_target_pairs, channel_id=None):
    mode = _group_mode(channel_id, None)
    me, count = _domain(ctx, mode)
    _check_ids("CollectivePermute", ctx, mode, [i for p in source_target_pairs for i in p],
               f"source_target_pairs={_fmt_groups(source_target_pairs)}")
    devices = _devices(ctx, mode, range(count))
    everyone = _exchange("collective-permute", ctx, devices, operands)
    sources = [s for s, t in source_target_pairs if t == me]
    if not sources:
        return _pack([np.zeros(s.dims, s.dtype) for s in _shapes(shape)], shape)
    return _pack(list(everyone[sources[0]]), shape)


registry.register("collective-permute", "CollectivePermute", "collective", _collective_permute_shape_rule,
                  _collective_permute_reference,
                  attrs=(Attr("channel_id", "int", default=None), Attr("source_target_pairs", "int_lists")),
                  needs_context=True, categories=("collective",))
describe("collective-permute", example={"operand": "f32[2,3]", "source_target_pairs": [[0, 1], [1, 0]]})


# -- ReduceScatter ---------------------------------------------------------------------------

def ReduceScatter(operand, computation, scatter_dimension=None, shard_count=None, replica_groups=(),
                  channel_id=None, layout=None, use_global_device_ids=False, *, scatter_dim=None,
                  replica_group_ids=None):
    """Wraps XLA's ReduceScatter: an AllReduce, whose result is split into ``shard_count``
    blocks along ``scatter_dimension``; the ``i``-th device of each group gets block ``i``::

        result@g[i] = block_i(AllReduce(operand, computation))

    Two replicas holding ``[1.0, 2.25]`` and ``[3.0, 5.25]`` (add, dimension 0) get
    ``[4.0]`` and ``[7.5]``.  HLO prints ``scatter_dimension`` as ``dimensions={d}``."""
    d = scatter_dimension if scatter_dimension is not None else scatter_dim
    if d is None:
        raise ShapeError("ReduceScatter: scatter_dimension is required")
    attrs = {"computation": computation, "scatter_dimension": d,
             "replica_groups": _groups(replica_groups, replica_group_ids), "channel_id": _channel(channel_id),
             "use_global_device_ids": use_global_device_ids}
    if shard_count is not None:
        attrs["shard_count"] = as_int("ReduceScatter", "shard_count", shard_count, minimum=1)
    return apply_op("reduce-scatter", _operand_list("ReduceScatter", operand), attrs)


def _reduce_scatter_shape_rule(*operands, computation, scatter_dimension, replica_groups=(), channel_id=None,
                               use_global_device_ids=False, shard_count=None, shape=None):
    _check_arrays("ReduceScatter", operands)                                 # reduce_scatter_c1
    for i, s in enumerate(operands):
        _check_dimension("ReduceScatter", "scatter_dimension", scatter_dimension, s, i)  # reduce_scatter_c2
    _check_groups("ReduceScatter", replica_groups, uniform=True)             # reduce_scatter_c3
    _check_mode("ReduceScatter", channel_id, use_global_device_ids, replica_groups)
    if shard_count is None:  # HLO text: the result shape says it
        shard_count = _counts_from_shape("ReduceScatter", operands, shape, scatter_dimension, grow=False)
    n = _group_size("ReduceScatter", replica_groups, shard_count, "shard_count",  # reduce_scatter_c4
                    per_replica_group=channel_id is not None and not use_global_device_ids)
    if n is None:
        raise ShapeError("ReduceScatter: shard_count is needed when replica_groups is empty")
    _check_reducer("ReduceScatter", computation, operands)                  # reduce_scatter_c5
    out = []
    for i, s in enumerate(operands):
        size = s.dims[scatter_dimension]
        if size is not None and size % n:                                    # reduce_scatter_c6
            raise ShapeError(f"ReduceScatter: dimension {scatter_dimension} of operand {i} {s} has size "
                             f"{size}, not divisible by shard_count={n}")
        dims = list(s.dims)
        dims[scatter_dimension] = None if size is None else size // n
        out.append(Shape(s.element_type, dims))
    return _result(out)


def _reduce_scatter_reference(*operands, shape, ctx, computation, scatter_dimension, replica_groups=(),
                              channel_id=None, use_global_device_ids=False, shard_count=None):
    mode = _group_mode(channel_id, bool(use_global_device_ids))
    devices = _participants("ReduceScatter", ctx, replica_groups, mode)
    me, n = devices.index(ctx.device_id), len(devices)
    everyone = _exchange("reduce-scatter", ctx, devices, operands)
    out = []
    for i, s in enumerate(_shapes(shape)):
        full_shape = Shape(s.element_type, operands[i].shape)
        reduced = _all_reduce_values([v[i] for v in everyone], computation, full_shape)
        if reduced.shape[scatter_dimension] != n * s.dims[scatter_dimension]:
            raise ExecutionError(f"ReduceScatter: the group has {n} devices but the result {s} expects "
                                 f"{reduced.shape[scatter_dimension] // max(s.dims[scatter_dimension], 1)}")
        out.append(np.split(reduced, n, axis=scatter_dimension)[me])
    return _pack(out, shape)


registry.register("reduce-scatter", "ReduceScatter", "collective", _reduce_scatter_shape_rule,
                  _reduce_scatter_reference,
                  attrs=_channel_attrs() + (Attr("use_global_device_ids", "bool", default=False),
                                            _OneDimension("scatter_dimension"),
                                            Attr("computation", "computation", hlo="to_apply")),
                  attrs_from_shape=lambda shape: {"shape": shape},
                  computation_params=_reducer_params("ReduceScatter"), needs_context=True,
                  categories=("collective",))
describe("reduce-scatter", shard_count={"kind": "int", "minimum": 1}, layout={"kind": "skip"},
         example={"operand": "f32[4,2]", "computation": "Add", "scatter_dimension": 0, "replica_groups": [[0, 1]]})


# -- CollectiveBroadcast ---------------------------------------------------------------------

def CollectiveBroadcast(operand, replica_groups, channel_id=None):
    """Wraps XLA's CollectiveBroadcast: in each group, the first device's operand goes to
    every member; a device in no group gets zeros::

        result@g[i] = operand@g[0]
    """
    return apply_op("collective-broadcast", [operand], {"replica_groups": _groups(replica_groups),
                                                        "channel_id": _channel(channel_id)})


def _collective_broadcast_shape_rule(operand, *, replica_groups=(), channel_id=None):
    _check_arrays("CollectiveBroadcast", [operand])                          # collective_broadcast_c1
    _check_groups("CollectiveBroadcast", replica_groups, uniform=False)      # collective_broadcast_c2
    _check_mode("CollectiveBroadcast", channel_id, None, replica_groups)
    return operand


def _collective_broadcast_reference(operand, *, shape, ctx, replica_groups=(), channel_id=None):
    mode = _group_mode(channel_id, None)
    me, count = _domain(ctx, mode)
    groups = [list(g) for g in replica_groups] or [list(range(count))]
    _check_ids("CollectiveBroadcast", ctx, mode, [i for g in groups for i in g],
               f"replica_groups={_fmt_groups(groups)}")
    mine = [g for g in groups if me in g]
    if not mine:
        return np.zeros(shape.dims, shape.dtype)
    everyone = _exchange("collective-broadcast", ctx, _devices(ctx, mode, mine[0]), operand)
    return everyone[0]


registry.register("collective-broadcast", "CollectiveBroadcast", "collective", _collective_broadcast_shape_rule,
                  _collective_broadcast_reference, attrs=_channel_attrs(), needs_context=True,
                  categories=("collective",))
describe("collective-broadcast", example={"operand": "f32[2,3]", "replica_groups": [[0, 1]]})


# -- index maps: every device at once --------------------------------------------------------
#
# A collective's map covers all devices: operand ``k`` is the devices' operands stacked
# (device first), the domain is ``(device, *result_index)`` and a read is
# ``(k, (source_device, *index))``.  Who meets whom is the references' own rule
# (``_participants`` with each device's view).

class _DeviceView:
    """What the group rules read from a run's context, for one device of ``R x P``."""

    def __init__(self, device, num_replicas, num_partitions):
        self.device_id = device
        self.replica_id, self.partition_id = divmod(device, num_partitions)
        self.num_replicas, self.num_partitions = num_replicas, num_partitions
        self.num_devices = num_replicas * num_partitions


def _views(op, operands, ctx):
    """One _DeviceView per device of the stacked operands (device count = leading size)."""
    n = int(np.shape(operands[0])[0]) if operands else 0
    R, P = (ctx.num_replicas, ctx.num_partitions) if ctx is not None else (n, 1)
    if R * P != n:
        R, P = n, 1
    return [_DeviceView(d, R, P) for d in range(n)]


def _collective_map(opcode, operands, shape, access, kind="copy"):
    from .index_map import IndexMap
    n = int(np.shape(operands[0])[0])
    dims = _shapes(shape)[0].dims
    return IndexMap(opcode, (n,) + tuple(dims), access, operand_shapes=tuple(Shape.of(o) for o in operands),
                    result_shape=shape, kind=kind)


def _groups_of(op, views, replica_groups, mode, none_ok=False):
    """Per device: its group (device numbers, in group order), or None (none_ok)."""
    out = []
    for v in views:
        try:
            out.append(_participants(op, v, replica_groups, mode))
        except ExecutionError:
            if not none_ok:
                raise
            out.append(None)
    return out


def _all_reduce_index_map(*operands, shape, ctx=None, computation, replica_groups=(), channel_id=None,
                          use_global_device_ids=False):
    """``result@d[i] = computation(...(operand@g[0][i], operand@g[1][i]), ...)``: each result
    element reads the same element of every device of its group, in group order."""
    from .index_map import Access
    views = _views("AllReduce", operands, ctx)
    groups = _groups_of("AllReduce", views, replica_groups, _group_mode(channel_id, bool(use_global_device_ids)))

    def access(index):
        d, i = index[0], tuple(index[1:])
        g = groups[d]
        return Access(index, reads=tuple((k, (s,) + i) for s in g for k in range(len(operands))),
                      detail={"device": d, "group": g, "result_index": i})
    return _collective_map("all-reduce", operands, shape, access, kind="reduce")


def _all_gather_index_map(*operands, shape, ctx=None, all_gather_dim, replica_groups=(), channel_id=None,
                          use_global_device_ids=False, shard_count=None):
    """``result@d`` is the group's operands concatenated along ``all_gather_dim``: element
    ``i`` with ``i[dim] = k * m + j`` copies ``operand@g[k]`` at ``j`` (``m`` the operand's size)."""
    from .index_map import Access
    views = _views("AllGather", operands, ctx)
    groups = _groups_of("AllGather", views, replica_groups, _group_mode(channel_id, bool(use_global_device_ids)))
    m = int(np.shape(operands[0])[1 + all_gather_dim])

    def access(index):
        d, i = index[0], tuple(index[1:])
        k, j = divmod(i[all_gather_dim], m)
        src = groups[d][k]
        oi = i[:all_gather_dim] + (j,) + i[all_gather_dim + 1:]
        return Access(index, reads=tuple((q, (src,) + oi) for q in range(len(operands))),
                      detail={"device": d, "group": groups[d], "block": k, "source_device": src,
                              "operand_index": oi})
    return _collective_map("all-gather", operands, shape, access)


def _all_to_all_index_map(*operands, shape, ctx=None, split_dimension=None, replica_groups=(), channel_id=None,
                          split_count=None):
    """Array form: ``result@g[me]`` along ``split_dimension`` is block ``me`` of every group
    member, in group order: element ``i`` with ``i[dim] = k * b + j`` copies
    ``operand@g[k]`` at ``me * b + j``.  Tuple form: result ``j`` is ``operands[me]@g[j]``."""
    from .index_map import Access
    views = _views("AllToAll", operands, ctx)
    groups = _groups_of("AllToAll", views, replica_groups, _group_mode(channel_id, None))

    def access(index):
        d, i = index[0], tuple(index[1:])
        g = groups[d]
        me = g.index(d)
        if split_dimension is None:
            return Access(index, reads=tuple((me, (src,) + i) for src in g),
                          detail={"device": d, "group": g, "position": me})
        b = int(np.shape(operands[0])[1 + split_dimension]) // len(g)
        k, j = divmod(i[split_dimension], b)
        oi = i[:split_dimension] + (me * b + j,) + i[split_dimension + 1:]
        return Access(index, reads=((0, (g[k],) + oi),),
                      detail={"device": d, "group": g, "position": me, "block": k, "block_size": b,
                              "source_device": g[k], "operand_index": oi})
    return _collective_map("all-to-all", operands, shape, access)


def _collective_permute_index_map(*operands, shape, ctx=None, source_target_pairs, channel_id=None):
    """``result@t = operand@s`` for each pair ``(s, t)``; a device that is no target gets zeros."""
    from .index_map import Access
    views = _views("CollectivePermute", operands, ctx)
    mode = _group_mode(channel_id, None)
    source = []
    for v in views:
        me, count = _domain(v, mode)
        ids = [s for s, t in source_target_pairs if t == me]
        source.append(_devices(v, mode, ids)[0] if ids else None)

    def access(index):
        d, i = index[0], tuple(index[1:])
        s = source[d]
        if s is None:
            return Access(index, source="init", detail={"device": d, "source_device": None})
        return Access(index, reads=tuple((k, (s,) + i) for k in range(len(operands))),
                      detail={"device": d, "source_device": s})
    return _collective_map("collective-permute", operands, shape, access)


def _reduce_scatter_index_map(*operands, shape, ctx=None, computation, scatter_dimension, replica_groups=(),
                              channel_id=None, use_global_device_ids=False, shard_count=None):
    """``result@g[me]`` is block ``me`` of the group's AllReduce: element ``i`` reads
    element ``i`` with ``i[dim] += me * b`` of every group member's operand."""
    from .index_map import Access
    views = _views("ReduceScatter", operands, ctx)
    groups = _groups_of("ReduceScatter", views, replica_groups,
                        _group_mode(channel_id, bool(use_global_device_ids)))
    b = int(_shapes(shape)[0].dims[scatter_dimension])

    def access(index):
        d, i = index[0], tuple(index[1:])
        g = groups[d]
        me = g.index(d)
        oi = i[:scatter_dimension] + (me * b + i[scatter_dimension],) + i[scatter_dimension + 1:]
        return Access(index, reads=tuple((k, (s,) + oi) for s in g for k in range(len(operands))),
                      detail={"device": d, "group": g, "position": me, "operand_index": oi})
    return _collective_map("reduce-scatter", operands, shape, access, kind="reduce")


def _collective_broadcast_index_map(operand, *, shape, ctx=None, replica_groups=(), channel_id=None):
    """``result@g[i] = operand@g[0]``; a device in no group gets zeros."""
    from .index_map import Access
    views = _views("CollectiveBroadcast", [operand], ctx)
    groups = _groups_of("CollectiveBroadcast", views, replica_groups, _group_mode(channel_id, None), none_ok=True)

    def access(index):
        d, i = index[0], tuple(index[1:])
        g = groups[d]
        if g is None:
            return Access(index, source="init", detail={"device": d, "group": None})
        return Access(index, reads=((0, (g[0],) + i),), detail={"device": d, "group": g, "source_device": g[0]})
    return _collective_map("collective-broadcast", [operand], shape, access)


def _per_operand(map_fn):
    """``map_fn`` for operands of any shapes.  Operands of one shape share one domain (a
    copy map's ``reads[j]`` is what result ``j`` copies).  Operands of different shapes
    (``all-reduce((f32[4], s32[2,3]))``): the collective treats each operand on its own,
    so the map is each operand's map over one domain, ``(device, k)`` with ``k`` the
    element's position in the device's results flattened one after the other (result 0's
    elements row-major, then result 1's ...); an access reads operand ``j``'s elements and
    ``writes`` ``(j, (device, *index))``, the result element it is; ``detail`` has
    ``result``, ``result_index`` and ``result_offsets`` (where each result starts in ``k``)."""
    import functools

    @functools.wraps(map_fn)
    def index_map(*operands, shape, ctx=None, **attrs):
        if len({tuple(np.shape(o))[1:] for o in operands}) <= 1:
            return map_fn(*operands, shape=shape, ctx=ctx, **attrs)
        from .index_map import Access, IndexMap
        shapes = _shapes(shape)
        maps = [map_fn(o, shape=r, ctx=ctx, **attrs) for o, r in zip(operands, shapes)]
        offsets = [0]
        for r in shapes:
            offsets.append(offsets[-1] + int(np.prod(r.dims, dtype=np.int64)))

        def access(index):
            d, k = index
            j = int(np.searchsorted(offsets, k, side="right")) - 1
            dims = shapes[j].dims
            i = tuple(int(x) for x in np.unravel_index(k - offsets[j], dims)) if dims else ()
            a = maps[j][(d,) + i]
            return Access(index, reads=tuple((j, where) for _, where in a.reads), writes=((j, (d,) + i),),
                          source=a.source, skipped=a.skipped, clamped=a.clamped, unknown=a.unknown,
                          detail={**a.detail, "result": j, "result_index": i, "result_offsets": tuple(offsets)})

        imap = IndexMap(maps[0].opcode, (int(np.shape(operands[0])[0]), offsets[-1]), access,
                        operand_shapes=tuple(m.operand_shapes[0] for m in maps), result_shape=shape,
                        kind=maps[0].kind)
        #: (result number, its per-device dims, where it starts in the flattened domain)
        imap.result_layout = tuple((j, tuple(r.dims), offsets[j]) for j, r in enumerate(shapes))
        return imap
    return index_map


# the maps join the ops registered above (they share the group rules defined with them)
for _opcode, _map in (("all-reduce", _all_reduce_index_map), ("all-gather", _all_gather_index_map),
                      ("all-to-all", _all_to_all_index_map), ("collective-permute", _collective_permute_index_map),
                      ("reduce-scatter", _reduce_scatter_index_map),
                      ("collective-broadcast", _collective_broadcast_index_map)):
    registry.OPS[_opcode].index_map = _per_operand(_map)


# -- channels: Infeed, Outfeed, Send, Recv ---------------------------------------------------

_CHANNELS = threading.Condition()  # guards every run's channel lists (device threads share them)


def _take(ctx, key, what, device_queue=False):
    """Pop the first value of ``ctx.channels[key]``, waiting for another device to put it."""
    from ..executors.reference import Rendezvous
    timeout = getattr(ctx.rendezvous, "timeout", Rendezvous.DEFAULT_TIMEOUT)
    with _CHANNELS:
        def queue():
            q = ctx.channels.get(key)
            if device_queue and isinstance(q, dict):
                q = q.get(ctx.device_id)
            return q
        deadline = time.monotonic() + timeout
        while ctx.num_devices > 1 and not queue() and time.monotonic() < deadline:
            # another device may still put it, unless every other device has finished
            if all(d in ctx.rendezvous._done for d in range(ctx.num_devices) if d != ctx.device_id):
                break
            _CHANNELS.wait(0.05)
        q = queue()
        if not q:
            raise ExecutionError(f"{what}: nothing to read; ctx.channels[{key!r}] is empty (pass "
                                 f"channels={{{key!r}: [values...]}} to run)")
        return q.pop(0)


def _put(ctx, key, value, per_device=False):
    with _CHANNELS:
        if per_device and ctx.num_devices > 1 and not isinstance(ctx.channels.get(key), list):
            ctx.channels.setdefault(key, {}).setdefault(ctx.device_id, []).append(value)
        else:
            ctx.channels.setdefault(key, []).append(value)
        _CHANNELS.notify_all()


def _conform(value, shape, what):
    from ..executors.reference import as_argument
    return as_argument(value, shape, what)


def _check_token(op, shape, what="token"):
    if not shape.is_token:
        raise ShapeError(f"{op}: the {what} operand must be a token[], got {shape}")


def Infeed(builder, shape, config=""):
    """Wraps XLA's Infeed: read one value of ``shape`` from the device's infeed queue (here
    ``channels["infeed"]``, a list, read from the front).  Records an ``after-all`` token
    and an ``infeed`` returning ``(value, token)``; returns the value."""
    from .control import AfterAll, GetTupleElement
    return GetTupleElement(InfeedWithToken(AfterAll(builder), shape, config), 0)


def InfeedWithToken(token, shape, config=""):
    """Wraps XLA's InfeedWithToken: ``(value, token)``, ordered after ``token``."""
    return apply_op("infeed", [token], {"shape": as_shape(shape), "config": config})


def _infeed_shape_rule(token, *, shape, config=""):
    _check_token("Infeed", token)                                            # infeed_c1
    if shape.is_token or any(s.is_tuple for s in (shape.tuple_shapes if shape.is_tuple else ())):
        raise ShapeError(f"Infeed: shape={shape} is not supported: an array or a tuple of arrays "
                         "(nested tuples are not)")                           # infeed_c2
    return Shape.tuple([shape, Shape.token()])


def _infeed_reference(token, *, shape, ctx, config=""):
    from ..executors.reference import Token
    data = shape.tuple_shapes[0]
    if data.is_tuple and not data.tuple_shapes:  # an empty tuple reads nothing
        return ((), Token())
    value = _take(ctx, "infeed", "Infeed", device_queue=True)
    return (_conform(value, data, "Infeed value"), Token())


registry.register("infeed", "Infeed", "collective", _infeed_shape_rule, _infeed_reference,
                  attrs=(Attr("config", "qstr", hlo="infeed_config", default=""),),
                  attrs_from_shape=lambda shape: {"shape": shape.tuple_shapes[0]} if shape.is_tuple else {},
                  needs_context=True, categories=("other",))
describe("infeed", shape={"kind": "shape"}, example={"shape": "f32[2,3]"})


def Outfeed(operand, shape_with_layout=None, outfeed_config=""):
    """Wraps XLA's Outfeed: write ``operand`` to the device's outfeed queue (here appended
    to ``channels["outfeed"]``; with several devices, ``channels["outfeed"][device]``)."""
    from .control import AfterAll
    builder = operand.builder if isinstance(operand, XlaOp) else None
    return OutfeedWithToken(operand, AfterAll(builder), shape_with_layout, outfeed_config)


def OutfeedWithToken(operand, token, shape_with_layout=None, outfeed_config=""):
    """Wraps XLA's OutfeedWithToken: returns a token ordered after the write."""
    shape = operand.shape if isinstance(operand, XlaOp) else Shape.of(operand)
    layout = shape if shape_with_layout is None else as_shape(shape_with_layout)
    return apply_op("outfeed", [operand, token], {"shape_with_layout": layout, "outfeed_config": outfeed_config})


def _outfeed_shape_rule(operand, token, *, shape_with_layout, outfeed_config=""):
    _check_token("Outfeed", token)                                            # outfeed_c1
    if not shape_with_layout.compatible(operand):                             # outfeed_c2
        raise ShapeError(f"Outfeed: shape_with_layout={shape_with_layout} does not match the operand {operand}")
    return Shape.token()


def _outfeed_reference(operand, token, *, shape, ctx, shape_with_layout, outfeed_config=""):
    from ..executors.reference import Token
    _put(ctx, "outfeed", operand, per_device=True)
    return Token()


registry.register("outfeed", "Outfeed", "collective", _outfeed_shape_rule, _outfeed_reference,
                  attrs=(_ShapeAttr("shape_with_layout", "outfeed_shape"),
                         Attr("outfeed_config", "qstr", default="")),
                  needs_context=True, categories=("other",))


def Send(operand, channel_handle):
    """Wraps XLA's Send: send ``operand`` to the Recv with the same channel (here appended to
    ``channels[channel_handle]``).  Records ``after-all``, ``send`` and ``send-done``; returns
    the token of the send-done."""
    from .control import AfterAll
    builder = operand.builder if isinstance(operand, XlaOp) else None
    return SendWithToken(operand, AfterAll(builder), channel_handle)


def SendWithToken(operand, token, channel_handle, is_host_transfer=False):
    """Wraps XLA's SendWithToken: ``send`` (a context ``(operand, u32[] id, token)``) and
    ``send-done`` (waits for it; returns a token)."""
    attrs = {"channel_id": _channel(channel_handle), "is_host_transfer": is_host_transfer}
    return SendDone(apply_op("send", [operand, token], attrs))


def SendDone(context):
    """Wraps HLO's SendDone: wait until the ``send`` whose context this is has been done;
    returns a token.  The channel is the send's."""
    return apply_op("send-done", [context], _context_attrs(context))


def _context_attrs(context):
    if isinstance(context, XlaOp):
        return {k: context.inst.attrs.get(k) for k in ("channel_id", "is_host_transfer")}
    raise ShapeError("SendDone/RecvDone: the context must be the XlaOp of a send or recv")


def SendToHost(operand, token, shape_with_layout, channel_handle):
    """Wraps XLA's SendToHost: a Send to the host (``is_host_transfer=true``)."""
    return SendWithToken(operand, token, channel_handle, is_host_transfer=True)


def Recv(builder, shape, channel_handle):
    """Wraps XLA's Recv: receive a value of ``shape`` from the Send with the same channel.
    Records ``after-all``, ``recv``, ``recv-done``; returns the value."""
    from .control import AfterAll, GetTupleElement
    return GetTupleElement(RecvWithToken(AfterAll(builder), shape, channel_handle), 0)


def RecvWithToken(token, shape, channel_handle, is_host_transfer=False):
    """Wraps XLA's RecvWithToken: ``recv`` (a context ``(buffer, u32[] id, token)``) and
    ``recv-done`` (waits for the data); returns ``(value, token)``."""
    attrs = {"channel_id": _channel(channel_handle), "is_host_transfer": is_host_transfer}
    return RecvDone(apply_op("recv", [token], dict(attrs, shape=as_shape(shape))))


def RecvDone(context):
    """Wraps HLO's RecvDone: wait for the data of the ``recv`` whose context this is;
    returns ``(value, token)``."""
    return apply_op("recv-done", [context], _context_attrs(context))


def RecvFromHost(token, shape, channel_handle):
    """Wraps XLA's RecvFromHost: a Recv from the host (``is_host_transfer=true``)."""
    return RecvWithToken(token, shape, channel_handle, is_host_transfer=True)


def _send_attrs():
    return (Attr("channel_id", "int"), Attr("is_host_transfer", "bool", default=False))


def _check_channel(op, channel_id):
    # a channel is an id >= 0 (as for the collectives); -1 reached the reference, whose
    # context keeps the id as the u32 it declares, as a bare OverflowError
    if channel_id is None or int(channel_id) < 0:
        raise ShapeError(f"{op}: channel_handle (channel_id={channel_id}) must be an integer >= 0")


def _u32_id(channel_id):
    """The context's u32 element: the channel id (modulo 2**32, XLA's ids are int64)."""
    return np.uint32(int(channel_id) & 0xFFFFFFFF)


def _send_shape_rule(operand, token, *, channel_id, is_host_transfer=False):
    if not operand.is_array:                                                  # send_c1
        raise ShapeError(f"Send: the operand must be an array, got {operand}")
    _check_token("Send", token)                                               # send_c2
    _check_channel("Send", channel_id)
    return Shape.tuple([operand, _U32, Shape.token()])


def _send_reference(operand, token, *, shape, ctx, channel_id, is_host_transfer=False):
    from ..executors.reference import Token
    _put(ctx, channel_id, operand)
    return (operand, _u32_id(channel_id), Token())


def _send_done_shape_rule(context, *, channel_id, is_host_transfer=False):
    if not (context.is_tuple and len(context.tuple_shapes) == 3 and context.tuple_shapes[2].is_token):
        raise ShapeError(f"SendDone: the operand must be a send's context (T, u32[], token[]), got {context}")
    return Shape.token()


def _recv_shape_rule(token, *, shape, channel_id, is_host_transfer=False):
    _check_token("Recv", token)                                               # recv_c1
    _check_channel("Recv", channel_id)
    if not shape.is_array:                                                    # recv_c2
        raise ShapeError(f"Recv: shape={shape} must be an array shape")
    return Shape.tuple([shape, _U32, Shape.token()])


def _recv_reference(token, *, shape, ctx, channel_id, is_host_transfer=False):
    from ..executors.reference import Token
    data = shape.tuple_shapes[0]  # the buffer is filled by RecvDone
    return (np.zeros(data.dims, data.dtype), _u32_id(channel_id), Token())


def _recv_done_shape_rule(context, *, channel_id, is_host_transfer=False):
    if not (context.is_tuple and len(context.tuple_shapes) == 3 and context.tuple_shapes[2].is_token):
        raise ShapeError(f"RecvDone: the operand must be a recv's context (T, u32[], token[]), got {context}")
    return Shape.tuple([context.tuple_shapes[0], Shape.token()])


def _recv_done_reference(context, *, shape, ctx, channel_id, is_host_transfer=False):
    from ..executors.reference import Token
    value = _take(ctx, channel_id, f"RecvDone (channel_id={channel_id})")
    return (_conform(value, shape.tuple_shapes[0], f"RecvDone (channel_id={channel_id}) value"), Token())


def _token_reference(*values, shape, ctx=None, **attrs):
    from ..executors.reference import Token
    return Token()


registry.register("send", "Send", "collective", _send_shape_rule, _send_reference, attrs=_send_attrs(),
                  needs_context=True, categories=("other",))
describe("send", channel_handle={"kind": "int", "minimum": 1}, example={"operand": "f32[2,3]", "channel_handle": 1})
registry.register("send-done", "SendDone", "collective", _send_done_shape_rule, _token_reference,
                  attrs=_send_attrs(), categories=("other",))
registry.register("recv", "Recv", "collective", _recv_shape_rule, _recv_reference, attrs=_send_attrs(),
                  attrs_from_shape=lambda shape: {"shape": shape.tuple_shapes[0]} if shape.is_tuple else {},
                  needs_context=True, categories=("other",))
describe("recv", shape={"kind": "shape"}, channel_handle={"kind": "int", "minimum": 1},
         example={"shape": "f32[2,3]", "channel_handle": 1})
registry.register("recv-done", "RecvDone", "collective", _recv_done_shape_rule, _recv_done_reference,
                  attrs=_send_attrs(), needs_context=True, categories=("other",))

from ..executors import spmd as _spmd  # noqa: E402,F401  (registers the SPMD custom-call targets)

__all__ = ["ReplicaId", "PartitionId", "AllReduce", "CrossReplicaSum", "AllGather", "AllToAll", "AllToAllTuple",
           "CollectivePermute", "ReduceScatter", "CollectiveBroadcast", "Infeed", "InfeedWithToken",
           "Outfeed", "OutfeedWithToken", "Send", "SendWithToken", "SendDone", "SendToHost", "Recv",
           "RecvWithToken", "RecvDone", "RecvFromHost"]
