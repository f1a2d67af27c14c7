"""Partitioned (SPMD) modules: split global arrays into shards, run per device, join.

JAX's ``shard_map`` and ``pmap`` give XLA *one* program for all devices (1 replica x N
partitions).  The ENTRY takes and returns global arrays; around the per-device body sit
custom-calls that say how the arrays are cut:

* Shardy: ``xla.sdy.GlobalToLocalShape`` (global -> this device's shard, by the
  ``xla.sdy.in_shardings`` of its frontend attributes and the module's ``#sdy.mesh``),
  ``xla.sdy.LocalToGlobalShape`` (shards -> global, by ``xla.sdy.out_shardings``),
  ``xla.sdy.FuncResultSharding`` (an annotation: the identity);
* GSPMD: ``Sharding`` (an annotation: the identity), ``SPMDFullToShardShape`` (cut by the
  ``sharding=`` of its operand, the ``Sharding`` call), ``SPMDShardToFullShape`` (join by
  its own ``sharding=``).

The simulation is the simplest one that is right: every device (a thread) runs the whole
ENTRY on the *global* arguments.  ``GlobalToLocalShape`` cuts out the device's own shard
(``ctx.partition_id`` located in the mesh or the tile assignment), the body's collectives
meet through the ``Rendezvous``, and ``LocalToGlobalShape`` gathers every device's shard
into the global array again.  ``run_partitioned`` returns device 0's result.

Shardings, both notations turned into one ``Tiling`` (a tile assignment array whose first
``rank`` dimensions tile the array's dimensions and whose last one, if any, lists the
devices holding the same tile):

* HLO: ``{replicated}``, ``{maximal device=1}``, ``{devices=[4,1]<=[4]}``,
  ``{devices=[2,2]0,2,1,3}``, ``{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}``,
  ``last_tile_dims={manual}``, tuples ``{{...}, {...}}``;
* Shardy: ``#sdy.sharding<@mesh, [{"x"}, {}]>`` over ``#sdy.mesh<["x"=2, "y"=2]>``
  (several axes on one dimension ``{"x", "y"}``, major first; sub-axes ``"x":(1)2``;
  ``device_ids=[...]``).

Simplifications against XLA: uneven shards are padded with zeros (as XLA pads them) and
the padding is dropped when joining; a replicated result is device 0's copy.
"""
import re

import numpy as np

from ..errors import ExecutionError
from ..hlo.attrs import sharding_error, split_top, unquote
from ..ops.custom_call import TARGETS, register_target
from ..shapes import Shape

#: the most devices a run simulates (each is a thread holding its own values)
MAX_DEVICES = 256

SHARDY_TARGETS = ("xla.sdy.GlobalToLocalShape", "xla.sdy.LocalToGlobalShape", "xla.sdy.FuncResultSharding")
GSPMD_TARGETS = ("SPMDFullToShardShape", "SPMDShardToFullShape")


# ---------------------------------------------------------------------------------------
# Tilings: which device holds which tile of an array

class Tiling:
    """A tile assignment: ``devices[t0, ..., t(rank-1), r]`` is a device holding tile
    ``(t0, ...)``; the devices along the last axis (if longer than 1) hold copies."""

    def __init__(self, devices, rank, text=""):
        self.devices = np.asarray(devices, dtype=np.int64)
        self.rank = rank
        self.text = text
        if self.devices.ndim == rank:
            self.devices = self.devices[..., None]
        self.devices = self.devices.reshape(self.devices.shape[:rank] + (-1,))

    @classmethod
    def replicated(cls, rank, num_devices):
        return cls(np.arange(num_devices).reshape((1,) * rank + (num_devices,)), rank, "{replicated}")

    @property
    def tiles(self):
        return self.devices.shape[:self.rank]

    @property
    def is_replicated(self):
        return all(t == 1 for t in self.tiles)

    def tile_index(self, device):
        """The tile that ``device`` holds, or None when it holds none."""
        where = np.argwhere(self.devices == device)
        if len(where) == 0:
            return None
        return tuple(int(i) for i in where[0][:self.rank])

    def shard_dims(self, global_dims, where=""):
        if len(global_dims) != self.rank:
            raise ExecutionError(f"{where}sharding {self.text} tiles {self.rank} dimensions but the array "
                                 f"has {len(global_dims)} ({list(global_dims)})")
        return tuple(-(-g // t) for g, t in zip(global_dims, self.tiles))  # ceil: XLA pads uneven shards

    def _region(self, index, global_dims, shard):
        return tuple(slice(min(i * s, g), min((i + 1) * s, g)) for i, s, g in zip(index, shard, global_dims))

    def shard(self, value, device, where=""):
        """The shard of the global ``value`` that ``device`` holds (zero-padded if uneven)."""
        value = np.asarray(value)
        shard = self.shard_dims(value.shape, where)
        index = self.tile_index(device)
        if index is None:  # maximal sharding on another device: everyone sees the whole value
            return value
        piece = value[self._region(index, value.shape, shard)]
        if piece.shape != shard:
            piece = np.pad(piece, [(0, s - p) for s, p in zip(shard, piece.shape)])
        return piece

    def join(self, shards, shape, own=None, where=""):
        """The global array of ``shape`` from ``shards[p]`` (device ``p``'s shard); device
        ``own``'s shard is written last, so it wins over other copies of its tile."""
        shard = self.shard_dims(shape.dims, where)
        out = np.zeros(shape.dims, shape.dtype)
        # a tile several devices hold is taken from the lowest of them (as JAX reads a
        # global array back), except that device ``own`` keeps its own
        order = [p for p in reversed(range(len(shards))) if p != own] + ([own] if own is not None else [])
        for p in order:
            index = self.tile_index(p)
            if index is None:
                continue
            local = np.asarray(shards[p])
            if local.shape != shard:
                raise ExecutionError(f"{where}device {p}'s shard is {list(local.shape)} but sharding "
                                     f"{self.text} of {shape} makes shards of {list(shard)}")
            region = self._region(index, shape.dims, shard)
            out[region] = local[tuple(slice(0, r.stop - r.start) for r in region)]
        return out

    def __repr__(self):
        return f"<Tiling {self.text or self.devices.tolist()}>"


def _iota_devices(dims, reshape, transpose):
    ids = np.arange(int(np.prod(reshape))).reshape(reshape)
    if transpose:
        ids = ids.transpose(transpose)
    return ids.reshape(dims)


def parse_hlo_sharding(text):
    """An HLO ``sharding=`` value -> a Tiling, a list of them (tuple shardings), or None
    for ``{manual}`` / ``{unknown}``; ``{replicated}`` and ``{maximal device=N}`` give
    placeholders that ``resolve`` turns into Tilings once the rank is known."""
    text = text.strip()
    if not (text.startswith("{") and text.endswith("}")):
        raise ExecutionError(f"sharding={text!r}: expected {{...}}")
    body = text[1:-1].strip()
    if body.startswith("{") or body == "":
        return [parse_hlo_sharding(part) for part in split_top(body)] if body else []
    body = re.sub(r"metadata=\{[^}]*\}", "", body).strip()
    word = body.split()[0] if body else ""
    if word in ("manual", "unknown"):
        return None
    if word == "replicated":
        return _Replicated()
    m = re.match(r"maximal\s+device=(\d+)", body)
    if m:
        return _Maximal(int(m.group(1)))
    m = re.match(r"devices=\[([\d,\s]+)\]\s*(?:<=\[([\d,\s]+)\](?:T\(([\d,\s]+)\))?|([\d,\s]+))", body)
    if not m:
        raise ExecutionError(f"sharding={text}: not a sharding this simulator reads")
    why = sharding_error(body)
    if why:
        raise ExecutionError(f"sharding={text}: {why}")
    dims = [int(x) for x in m.group(1).split(",")]
    if m.group(2):
        devices = _iota_devices(dims, [int(x) for x in m.group(2).split(",")],
                                [int(x) for x in m.group(3).split(",")] if m.group(3) else None)
    else:
        devices = np.array([int(x) for x in m.group(4).replace(" ", "").split(",") if x]).reshape(dims)
    subgroups = 0
    if "last_tile_dim_replicate" in body:
        subgroups = 1
    m2 = re.search(r"last_tile_dims=\{([^}]*)\}", body)
    if m2:
        subgroups = len([x for x in m2.group(1).split(",") if x.strip()])
    data_rank = len(dims) - subgroups
    if subgroups > 1:  # fold every subgroup dimension into one "copies" dimension
        devices = devices.reshape(dims[:data_rank] + [-1])
    return Tiling(devices, data_rank, text)


class _Replicated:
    """``{replicated}`` before the array's rank and the device count are known."""

    def tiling(self, rank, num_devices):
        return Tiling.replicated(rank, num_devices)


class _Maximal:
    """``{maximal device=N}``: the whole array on device N."""

    def __init__(self, device):
        self.device = device

    def tiling(self, rank, num_devices):
        return Tiling(np.full((1,) * rank + (1,), self.device), rank, f"{{maximal device={self.device}}}")


def resolve(sharding, rank, num_devices):
    """A parsed sharding (Tiling or placeholder) as a Tiling for an array of ``rank``."""
    if isinstance(sharding, (_Replicated, _Maximal)):
        return sharding.tiling(rank, num_devices)
    return sharding


# ---------------------------------------------------------------------------------------
# Shardy: meshes and #sdy.sharding

class Mesh:
    """``#sdy.mesh<["x"=2, "y"=2], device_ids=[...]>``: named axes over the devices."""

    def __init__(self, axes, device_ids=None):
        self.axes = list(axes)  # [(name, size)], major to minor
        self.size = int(np.prod([s for _, s in self.axes])) if self.axes else 1
        self.device_ids = np.arange(self.size) if device_ids is None else np.asarray(device_ids)

    def __repr__(self):
        return f"<Mesh {self.axes}>"


_MESH = re.compile(r"([\w.$-]+)\s*=\s*#sdy\.mesh<\s*\[([^\]]*)\]\s*(?:,\s*device_ids=\[([\d,\s]*)\])?\s*>")


def parse_meshes(text):
    """Every ``name = #sdy.mesh<...>`` in ``text`` (the module's frontend attributes)."""
    text = str(text or "").replace('\\"', '"')
    meshes = {}
    for m in _MESH.finditer(text):
        axes = [(a, int(s)) for a, s in re.findall(r'"([^"]+)"\s*=\s*(\d+)', m.group(2))]
        ids = [int(x) for x in m.group(3).split(",") if x.strip()] if m.group(3) else None
        meshes[m.group(1)] = Mesh(axes, ids)
    return meshes


_SDY_VALUE = re.compile(r"<\s*@([\w.$-]+)\s*,\s*\[([^\]]*)\]")


def parse_sdy_shardings(text):
    """``#sdy.sharding<@mesh, [{"x"}, {}]>`` or ``#sdy.sharding_per_value<[<...>, ...]>``
    -> [(mesh name, [[(axis, pre_size, size or None), ...] per dimension]), ...]."""
    text = str(text).replace('\\"', '"')
    out = []
    for m in _SDY_VALUE.finditer(text):
        dims = []
        for body in re.findall(r"\{([^}]*)\}", m.group(2)):
            dims.append([(a, int(pre) if pre else 1, int(size) if size else None)
                         for a, pre, size in re.findall(r'"([^"]+)"(?::\((\d+)\)(\d+))?', body)])
        out.append((m.group(1), dims))
    return out


def sdy_tiling(mesh, dims, only_axes=None, text=""):
    """The Tiling of a Shardy sharding: the mesh's device array with each dimension's axes
    brought forward (major first) and the rest of the axes left as copies."""
    # split every axis into factors at its sub-axis boundaries, as minor strides: an axis
    # of size n read as [pre, size, n/(pre*size)] (major to minor) makes the sub-axis
    # "x":(pre)size the factor from stride n/(pre*size) to stride n/pre
    cuts = {name: {1, size} for name, size in mesh.axes}
    for axes in dims:
        for name, pre, size in axes:
            if name not in cuts:
                raise ExecutionError(f"sharding {text}: axis {name!r} is not in the mesh {mesh.axes}")
            if size is not None:
                n = mesh_size(mesh, name)
                cuts[name] |= {n // (pre * size), n // pre}
    factors = []  # (axis name, lo, hi), major to minor, in mesh order
    for name, size in mesh.axes:
        bounds = sorted(cuts[name])
        factors += [(name, lo, hi) for lo, hi in reversed(list(zip(bounds, bounds[1:])))]
    array = mesh.device_ids.reshape([hi // lo for _, lo, hi in factors] or [1])
    used, order, tiles = set(), [], []
    for axes in dims:
        n = 1
        for name, pre, size in axes:
            if only_axes is not None and name not in only_axes:
                continue
            full = mesh_size(mesh, name)
            lo_end, hi_end = (1, full) if size is None else (full // (pre * size), full // pre)
            for k, (f, lo, hi) in enumerate(factors):
                if f == name and lo >= lo_end and hi <= hi_end:
                    order.append(k)
                    used.add(k)
                    n *= hi // lo
        tiles.append(n)
    rest = [k for k in range(len(factors)) if k not in used]
    devices = array.transpose(order + rest).reshape(tiles + [-1])
    return Tiling(devices, len(dims), text)


def mesh_size(mesh, axis):
    for name, size in mesh.axes:
        if name == axis:
            return size
    raise ExecutionError(f"axis {axis!r} is not in the mesh {mesh.axes}")


def parse_frontend_attributes(raw):
    """``{key="value",key2={...}}`` -> {key: value} (values unquoted)."""
    if raw is None:
        return {}
    raw = raw.strip()
    if raw.startswith("{") and raw.endswith("}"):
        raw = raw[1:-1]
    out = {}
    for part in split_top(raw):
        key, eq, value = part.partition("=")
        if eq:
            value = value.strip()
            out[key.strip()] = unquote(value) if value.startswith('"') else value
    return out


# ---------------------------------------------------------------------------------------
# What a module says about its devices

def _raw(inst, name):
    value = inst.attrs.get(name)
    return value if value is not None else inst.extra.get(name)


class SpmdInfo:
    """A module's partition count, meshes and the shardings of its arguments and results."""

    def __init__(self, module):
        try:
            self._read(module)
        except (ValueError, TypeError, KeyError, IndexError, OverflowError, AttributeError) as e:
            from ..errors import HloParseError, ShapeError
            if isinstance(e, (ShapeError, HloParseError)):
                raise
            raise ExecutionError(f"module {module.name}: its sharding annotations (sharding=, the mesh in "
                                 f"frontend_attributes) do not read: {type(e).__name__}: {e}") from None
        if self.num_replicas * max(self.num_partitions, 1) > MAX_DEVICES:
            raise ExecutionError(f"module {module.name}: {self.num_replicas} replicas x {self.num_partitions} "
                                 f"partitions are more simulated devices than the {MAX_DEVICES} supported")

    def _read(self, module):
        attrs = module.module_attrs
        self.meshes = parse_meshes(attrs.get("frontend_attributes", ""))
        entry = module.entry
        targets = set()
        shardings = []
        for inst in entry.instructions:
            if inst.opcode == "custom-call":
                targets.add(inst.attrs.get("custom_call_target"))
            text = _raw(inst, "sharding")
            if text:
                shardings.append(text)
        self.uses_spmd_calls = bool(targets & set(SHARDY_TARGETS + GSPMD_TARGETS))
        self.num_replicas = _int(attrs.get("replica_count"), 1)
        self.num_partitions = _int(attrs.get("num_partitions"), 0) or self._count_devices(shardings)
        self.is_partitioned = (self.num_partitions > 1 or self.uses_spmd_calls or bool(self.meshes))
        self.module = module

    def _count_devices(self, shardings):
        n = max([m.size for m in self.meshes.values()] or [1])
        for text in shardings:
            for m in re.finditer(r"devices=\[([\d,\s]+)\]", text):
                n = max(n, int(np.prod([int(x) for x in m.group(1).split(",")])))
            for m in re.finditer(r"maximal device=(\d+)", text):
                n = max(n, int(m.group(1)) + 1)
        return n

    # -- the shardings of the ENTRY's arguments and results ------------------------------
    def value_tiling(self, inst, shape):
        """The Tiling of the value of ``inst`` (a parameter, the root): its own HLO
        ``sharding=`` or ``xla.sdy.sharding``, else the sharding of the custom-call that
        cuts a parameter into shards or that joins a result from them; None if none."""
        own = self._own_tiling(inst, shape)
        if own is not None:
            return own
        if inst.opcode == "parameter":
            return self._tiling_from_users(inst)
        return self._tiling_from_producer(inst)

    def _own_tiling(self, inst, shape):
        text = _raw(inst, "sharding")
        if text:
            return self._resolve_tree(parse_hlo_sharding(text), shape)
        sdy = parse_frontend_attributes(_raw(inst, "frontend_attributes")).get("xla.sdy.sharding")
        if sdy:
            tilings = [self.sdy(mesh, dims, text=sdy) for mesh, dims in parse_sdy_shardings(sdy)]
            return tilings[0] if shape.is_array and len(tilings) == 1 else tilings
        return None

    def _tiling_from_users(self, param):
        for user in self.module.entry.instructions:
            if user.opcode != "custom-call" or param not in user.operands:
                continue
            target, k = user.attrs.get("custom_call_target"), user.operands.index(param)
            if target == "xla.sdy.GlobalToLocalShape":
                fa = parse_frontend_attributes(_raw(user, "frontend_attributes"))
                text = fa.get("xla.sdy.in_shardings", "")
                found = parse_sdy_shardings(text)
                if k < len(found):
                    return self.sdy(*found[k], only_axes=_manual_axes(fa), text=text)
            elif target == "Sharding":
                tiling = self._own_tiling(user, user.shape)
                if isinstance(tiling, Tiling):
                    return tiling
        return None

    def _tiling_from_producer(self, inst, index=None):
        own = self._own_tiling(inst, inst.shape)
        if isinstance(own, list):
            return own[index] if index is not None and index < len(own) else None
        if own is not None:
            return own
        if inst.opcode == "get-tuple-element":
            return self._tiling_from_producer(inst.operands[0], inst.attrs["index"])
        if inst.opcode != "custom-call":
            return None
        target = inst.attrs.get("custom_call_target")
        if target == "xla.sdy.LocalToGlobalShape":
            fa = parse_frontend_attributes(_raw(inst, "frontend_attributes"))
            text = fa.get("xla.sdy.out_shardings", "")
            found = parse_sdy_shardings(text)
            k = index or 0
            return self.sdy(*found[k], only_axes=_manual_axes(fa), text=text) if k < len(found) else None
        if target in ("xla.sdy.FuncResultSharding", "Sharding") and len(inst.operands) == 1:
            return self._tiling_from_producer(inst.operands[0], index)
        return None

    def _resolve_tree(self, parsed, shape):
        if isinstance(parsed, list):
            if not shape.is_tuple or len(parsed) != len(shape.tuple_shapes):
                return None
            return [self._resolve_tree(p, s) for p, s in zip(parsed, shape.tuple_shapes)]
        return None if parsed is None or not shape.is_array else resolve(parsed, shape.rank, self.num_partitions)

    def result_tilings(self):
        """One Tiling (or None) per result of the ENTRY (a list even for one array)."""
        root = self.module.entry.root
        shape = root.shape
        tiling = self.value_tiling(root, shape)
        if shape.is_tuple:
            if tiling is None and root.opcode == "tuple":
                return [self.value_tiling(o, o.shape) if o.shape.is_array else None for o in root.operands]
            return list(tiling) if tiling is not None else [None] * len(shape.tuple_shapes)
        return [tiling]

    def sdy(self, mesh_name, dims, only_axes=None, text=""):
        mesh = self.meshes.get(mesh_name)
        if mesh is None:
            raise ExecutionError(f"sharding {text} names mesh @{mesh_name} but the module defines "
                                 f"{sorted(self.meshes) or 'no mesh'} (frontend_attributes xla.sdy.meshes)")
        return sdy_tiling(mesh, dims, only_axes, text)


def _int(text, default):
    try:
        return int(str(text).strip())
    except (TypeError, ValueError):
        return default


def num_partitions(module):
    return SpmdInfo(module).num_partitions


def is_partitioned(module):
    """True for a module JAX partitioned (shard_map / pmap): several partitions, a mesh, or
    the SPMD custom-calls."""
    return SpmdInfo(module).is_partitioned


# ---------------------------------------------------------------------------------------
# Running

def run_partitioned(module, args, on_value=None, channels=None, timeout=None):
    """``comp.run(*global_args)`` of a partitioned module: every device runs the ENTRY on
    the global arguments (cutting its shards out itself); device 0's result is returned."""
    from .reference import run, run_on_devices
    info = SpmdInfo(module)

    def work(ctx):
        return run(module, args, ctx=ctx, on_value=on_value if ctx.device_id == 0 else None)

    return run_on_devices(work, info.num_replicas, info.num_partitions, channels=channels,
                          timeout=timeout, spmd=info)[0]


def run_per_device(module, per_device_args, num_partitions, channels=None, timeout=None, runner=None):
    """``comp.run_replicated([[args of device 0], ...])`` of a partitioned module.

    An argument with the parameter's (global) shape is taken as it is; one with another
    shape is a local shard, placed into the global argument by the parameter's sharding
    (device ``d`` sees its own shard there, the others' shards around it).  Each device's
    results are cut to the shards it holds by the ENTRY root's sharding."""
    from .reference import as_argument, run, run_on_devices
    info = SpmdInfo(module)
    entry = module.entry
    n = len(per_device_args)
    num_replicas = n // num_partitions
    params = entry.parameters
    for d, args in enumerate(per_device_args):
        if len(args) != len(params):
            raise ExecutionError(f"run_replicated: device {d} gets {len(args)} arguments, {module.name} "
                                 f"takes {len(params)} ({', '.join(str(p.shape) for p in params)})")
    device_args = [list(args) for args in per_device_args]
    for i, p in enumerate(params):
        local = [np.asarray(per_device_args[d][i]) if not isinstance(per_device_args[d][i], tuple)
                 else per_device_args[d][i] for d in range(n)]
        if all(p.shape.is_array and getattr(v, "shape", None) == p.shape.dims for v in local) \
                or not p.shape.is_array:
            continue
        tiling = info.value_tiling(p, p.shape)
        if not isinstance(tiling, Tiling):
            raise ExecutionError(f"run_replicated: argument {i} ({p.name}: {p.shape}) is given as "
                                 f"{list(local[0].shape)} on device 0 and the module gives no sharding to "
                                 "place such a shard; pass the global array")
        for r in range(num_replicas):
            ids = range(r * num_partitions, (r + 1) * num_partitions)
            shards = [as_argument(local[d], Shape(p.shape.element_type, tiling.shard_dims(p.shape.dims)),
                                  f"device {d} argument {i} ({p.name})") for d in ids]
            for k, d in enumerate(ids):
                device_args[d][i] = tiling.join(shards, p.shape, own=k, where=f"argument {i} ({p.name}): ")
    results = info.result_tilings()

    runner = runner or (lambda m, a, c: run(m, a, ctx=c))

    def work(ctx):
        out = runner(module, device_args[ctx.device_id], ctx)
        values = list(out) if entry.root.shape.is_tuple else [out]
        cut = [t.shard(v, ctx.partition_id) if isinstance(t, Tiling) else v for v, t in zip(values, results)]
        return tuple(cut) if entry.root.shape.is_tuple else cut[0]

    return run_on_devices(work, num_replicas, num_partitions, channels=channels, timeout=timeout, spmd=info)


# ---------------------------------------------------------------------------------------
# The custom-call targets

def _values(values, shape):
    return tuple(values) if shape.is_tuple else values[0]


def _shapes(shape):
    return list(shape.tuple_shapes) if shape.is_tuple else [shape]


def _need_spmd(ctx, target):
    if ctx.spmd is None:
        raise ExecutionError(f"CustomCall {target}: the module is partitioned; run it with comp.run(...) "
                             "(which simulates its devices) or comp.run_replicated(...)")
    return ctx.spmd


def _sdy_tilings(ctx, target, text, shapes, manual_axes=None):
    info = _need_spmd(ctx, target)
    found = parse_sdy_shardings(text)
    if len(found) != len(shapes):
        raise ExecutionError(f"CustomCall {target}: {len(found)} shardings ({text}) for {len(shapes)} values")
    return [info.sdy(mesh, dims, manual_axes, text) for mesh, dims in found]


def _manual_axes(fa):
    text = fa.get("xla.sdy.manual_axes")
    return set(re.findall(r'"([^"]+)"', text.replace('\\"', '"'))) if text else None


def _cut(values, tilings, shape, ctx, target):
    out = []
    for i, (v, t, s) in enumerate(zip(values, tilings, _shapes(shape))):
        local = t.shard(v, ctx.partition_id, f"CustomCall {target} operand {i}: ")
        if local.shape != s.dims:
            raise ExecutionError(f"CustomCall {target}: operand {i} {list(np.shape(v))} cut by {t.text} gives "
                                 f"{list(local.shape)} but the result is {s}")
        out.append(local)
    return _values(out, shape)


def _gather(values, tilings, shape, ctx, target):
    """Every partition of this replica sends its shards; each joins the global arrays."""
    P, r = ctx.num_partitions, ctx.replica_id
    devices = [r * P + p for p in range(P)]
    everyone = ctx.rendezvous.exchange(ctx.next_key((target, tuple(devices))), ctx.device_id,
                                       tuple(values), devices)
    out = []
    for i, (t, s) in enumerate(zip(tilings, _shapes(shape))):
        if t is None or t.is_replicated:
            out.append(values[i])
            continue
        out.append(t.join([everyone[p][i] for p in range(P)], s, own=ctx.partition_id,
                          where=f"CustomCall {target} operand {i}: "))
    return _values(out, shape)


def _global_to_local(*values, shape, ctx, frontend_attributes=None, **attrs):
    target = "xla.sdy.GlobalToLocalShape"
    fa = parse_frontend_attributes(frontend_attributes or _raw(ctx.instruction, "frontend_attributes"))
    tilings = _sdy_tilings(ctx, target, fa.get("xla.sdy.in_shardings", ""), _shapes(shape), _manual_axes(fa))
    return _cut(values, tilings, shape, ctx, target)


def _local_to_global(*values, shape, ctx, frontend_attributes=None, **attrs):
    target = "xla.sdy.LocalToGlobalShape"
    fa = parse_frontend_attributes(frontend_attributes or _raw(ctx.instruction, "frontend_attributes"))
    tilings = _sdy_tilings(ctx, target, fa.get("xla.sdy.out_shardings", ""), _shapes(shape), _manual_axes(fa))
    return _gather(values, tilings, shape, ctx, target)


def _identity(*values, shape, ctx, **attrs):
    return _values(values, shape)


def _hlo_tiling(ctx, target, text, shape):
    _need_spmd(ctx, target)
    return resolve(parse_hlo_sharding(text), shape.rank, ctx.num_partitions)


def _full_to_shard(value, *, shape, ctx, **attrs):
    """Cut by the operand's sharding: JAX puts a ``Sharding`` custom-call right before."""
    target = "SPMDFullToShardShape"
    _need_spmd(ctx, target)
    operand = ctx.instruction.operands[0] if ctx.instruction is not None and ctx.instruction.operands else None
    text = _raw(operand, "sharding") if operand is not None else None
    tiling = _hlo_tiling(ctx, target, text, shape) if text else None
    if tiling is None:  # no sharding to read: tiles from the shapes, devices in iota order
        tiles = [g // max(s, 1) for g, s in zip(np.shape(value), shape.dims)]
        tiling = Tiling(np.arange(ctx.num_partitions).reshape(tiles + [-1]), shape.rank, f"tiles {tiles}")
    return _cut([value], [tiling], shape, ctx, target)


def _shard_to_full(value, *, shape, ctx, sharding=None, **attrs):
    target = "SPMDShardToFullShape"
    text = sharding or _raw(ctx.instruction, "sharding")
    tiling = _hlo_tiling(ctx, target, text, shape) if text else None
    return _gather([value], [tiling], shape, ctx, target)


def _same_shapes_rule(*operand_shapes, shape, **attrs):
    """An annotation returns its operands as they are (one operand: its shape; several: a tuple)."""
    want = operand_shapes[0] if len(operand_shapes) == 1 else Shape.tuple(operand_shapes)
    if not want.compatible(shape):
        raise _shape_error(f"CustomCall: an annotation returns its operand's shape {want}, not {shape}")


def _resharded_rule(*operand_shapes, shape, **attrs):
    """Cutting into shards or joining them keeps each array's element type and rank."""
    leaves = [s for o in operand_shapes for s in o.leaves()]
    results = shape.leaves()
    if len(leaves) != len(results) or any(a.element_type != b.element_type or a.rank != b.rank
                                          for a, b in zip(leaves, results)):
        raise _shape_error(f"CustomCall: resharding keeps element types and ranks: operands "
                           f"{[str(s) for s in leaves]}, result {shape}")


def _shape_error(message):
    from ..errors import ShapeError
    return ShapeError(message)


for _name, _fn, _rule in (("xla.sdy.GlobalToLocalShape", _global_to_local, _resharded_rule),
                          ("xla.sdy.LocalToGlobalShape", _local_to_global, _resharded_rule),
                          ("xla.sdy.FuncResultSharding", _identity, _same_shapes_rule),
                          ("Sharding", _identity, _same_shapes_rule),
                          ("SPMDFullToShardShape", _full_to_shard, _resharded_rule),
                          ("SPMDShardToFullShape", _shard_to_full, _resharded_rule)):
    if _name not in TARGETS:
        register_target(_name, _fn, _rule)
