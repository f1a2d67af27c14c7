"""A ``sharding=`` whose device list cannot fill its tile assignment is refused when the
module is verified, on every backend alike, naming the instruction, its line and the
counts (before: the reference failed deep in NumPy -- "cannot reshape array of size 2
into shape (4,1)" -- and numba ran the module).  The same check makes an iota
``replica_groups`` of the wrong size an HloParseError."""
import numpy as np
import pytest

import xla_explorer as xe
from xla_explorer.errors import HloParseError, ShapeError
from xla_explorer.hlo.attrs import iota_error, parse_int_lists, sharding_error

# jax's shard_map of an all-gather and a collective-permute on 4 devices (the corpus'
# coll_shmap_gspmd_all_gather_ppermute)
_MODULE = """HloModule jit__lambda, entry_computation_layout={(f32[4,3]{1,0})->(f32[4,3]{1,0}, f32[4,3]{1,0})}

shmap_body.1 {
  a.2 = f32[1,3]{1,0} parameter(0)
  all_gather.1 = f32[4,3]{1,0} all-gather(a.2), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true
  ppermute.1 = f32[1,3]{1,0} collective-permute(a.2), channel_id=1, source_target_pairs={{0,3},{3,0},{1,2},{2,1}}
  ROOT tuple.1 = (f32[4,3]{1,0}, f32[1,3]{1,0}) tuple(all_gather.1, ppermute.1)
}

ENTRY main.2 {
  a.1 = f32[4,3]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}
  shard_map.9 = f32[4,3]{1,0} custom-call(a.1), custom_call_target="Sharding", sharding=SHARDING
  shard_map.10 = f32[1,3]{1,0} custom-call(shard_map.9), custom_call_target="SPMDFullToShardShape", sharding={manual}
  shard_map.11 = (f32[4,3]{1,0}, f32[1,3]{1,0}) call(shard_map.10), to_apply=shmap_body.1
  shard_map.12 = f32[4,3]{1,0} get-tuple-element(shard_map.11), index=0
  shard_map.14 = f32[4,3]{1,0} custom-call(shard_map.12), custom_call_target="Sharding", sharding={manual}
  shard_map.15 = f32[4,3]{1,0} custom-call(shard_map.14), custom_call_target="SPMDShardToFullShape", sharding={replicated}
  shard_map.13 = f32[1,3]{1,0} get-tuple-element(shard_map.11), index=1
  shard_map.16 = f32[1,3]{1,0} custom-call(shard_map.13), custom_call_target="Sharding", sharding={manual}
  shard_map.17 = f32[4,3]{1,0} custom-call(shard_map.16), custom_call_target="SPMDShardToFullShape", sharding={devices=[4,1]<=[4]}
  ROOT tuple.3 = (f32[4,3]{1,0}, f32[4,3]{1,0}) tuple(shard_map.15, shard_map.17), sharding={{replicated}, {devices=[4,1]<=[4]}}
}
"""


def _backends():
    out = ["numpy"]
    try:
        import numba  # noqa: F401
        out.append("numba")
    except ImportError:
        pass
    return out


def test_a_valid_sharding_runs_the_same_on_every_backend():
    comp = xe.parse_hlo(_MODULE.replace("SHARDING", "{devices=[4,1]<=[4]}"))
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    results = [comp.run(x, backend=b) for b in _backends()]
    for r in results[1:]:
        for a, b in zip(r, results[0]):
            np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(results[0][0], x)          # the all-gather
    np.testing.assert_array_equal(results[0][1], x[[3, 2, 1, 0]])  # the permute


@pytest.mark.parametrize("sharding, words", [
    ("{devices=[4,1]<=[2]}", "makes 2 ids for the 4 places of [4,1]"),
    ("{devices=[2,2]<=[2,2]T(0,0)}", "T(0,0) is not a permutation"),
    ("{devices=[4,1]0,1,2}", "has 4 tiles but lists 3 devices"),
    ("{devices=[4,1]0,1,2,2}", "lists device 2 twice"),
])
def test_a_device_list_that_cannot_fill_the_tiles_is_refused_on_every_backend(sharding, words):
    comp = xe.parse_hlo(_MODULE.replace("SHARDING", sharding))
    x = np.zeros((4, 3), np.float32)
    for backend in _backends():
        with pytest.raises(ShapeError) as e:
            comp.run(x, backend=backend)
        msg = str(e.value)
        assert "shard_map.9" in msg and "line" in msg and words in msg, (backend, msg)


def test_the_checks_name_the_counts():
    assert sharding_error("{devices=[2,2]<=[4]}") is None
    assert sharding_error("{devices=[2,2]<=[2,2]T(1,0)}") is None
    assert sharding_error("{devices=[1,2,2]<=[4] last_tile_dim_replicate}") is None
    assert sharding_error("{replicated}") is None and sharding_error("{manual}") is None
    assert "3 ids for the 4 places" in sharding_error("{{replicated}, {devices=[4,1]<=[3]}}")
    assert iota_error([2, 3], [6]) is None
    assert "T(1,1,0)" in iota_error([2, 3], [2, 3], [1, 1, 0])


def test_an_iota_replica_group_of_the_wrong_size_is_a_parse_error():
    assert parse_int_lists("[2,2]<=[4]") == ((0, 1), (2, 3))
    assert parse_int_lists("[2,2]<=[2,2]T(1,0)") == ((0, 2), (1, 3))
    with pytest.raises(HloParseError, match=r"makes 3 ids for the 4 places"):
        parse_int_lists("[2,2]<=[3]")
    with pytest.raises(HloParseError, match=r"not a permutation"):
        parse_int_lists("[2,2]<=[2,2]T(0,2)")
