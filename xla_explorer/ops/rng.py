"""Random numbers: RngUniform and RngNormal (HLO ``rng``), RngBitGenerator
(HLO ``rng-bit-generator``).

``rng`` is stateful and nondeterministic in XLA: the reference draws from the run's
``ctx.rng`` (a seeded NumPy generator), so only the distribution is comparable.
``rng-bit-generator`` is a deterministic function of its state, and this reference
reproduces XLA:CPU bit for bit: XLA expands it (RngBitGeneratorExpander) into the
counter-based generators of ``xla/hlo/builder/lib/prng.cc``: Philox4x32-10 (what
``rng_default`` is on CPU) and Threefry2x32-20 (Salmon et al., "Parallel random numbers:
as easy as 1, 2, 3", SC 2011).  The code below is written from those descriptions.
"""
import numpy as np

from .. import dtypes
from ..builder import apply_op
from ..errors import ShapeError
from ..hlo.attrs import Attr
from ..shapes import Shape
from .arguments import describe
from . import registry

# ---------------------------------------------------------------------------------------
# RngUniform, RngNormal  (HLO `rng`)


def _as_data_shape(shape):
    if isinstance(shape, Shape):
        return shape
    if isinstance(shape, str):
        return Shape.parse(shape)
    element_type, dims = shape  # ("f32", (2, 3))
    return Shape(element_type if isinstance(element_type, str) else dtypes.from_numpy(element_type), dims)


def RngUniform(a, b, shape):
    """Wraps XLA's RngUniform: an array of ``shape`` drawn uniformly from ``[a, b)``
    (scalars of the shape's element type: pred, integers or floats).  XLA leaves the
    result for ``b <= a`` implementation-defined (here: ``a``), and the draws themselves
    are not reproducible across runs or backends.

    >>> RngUniform(np.float32(0), np.float32(1), "f32[3]").shape
    (3,)
    """
    return apply_op("rng", [a, b], {"distribution": "rng_uniform", "shape": _as_data_shape(shape)})


def RngNormal(mu, sigma, shape):
    """Wraps XLA's RngNormal: an array of ``shape`` drawn from the normal distribution
    N(``mu``, ``sigma``) (floating scalars of the shape's element type)."""
    return apply_op("rng", [mu, sigma], {"distribution": "rng_normal", "shape": _as_data_shape(shape)})


def _rng_shape_rule(a, b, *, distribution, shape):
    op = {"rng_uniform": "RngUniform", "rng_normal": "RngNormal"}.get(distribution)
    if op is None:
        raise ShapeError(f"Rng: distribution={distribution!r} must be rng_uniform or rng_normal")
    names = ("a", "b") if op == "RngUniform" else ("mu", "sigma")
    if not shape.is_array:
        raise ShapeError(f"{op}: shape must be an array shape, got {shape}")
    for name, s in zip(names, (a, b)):
        if not s.is_array or s.rank != 0:  # rng_c1: scalar parameters
            raise ShapeError(f"{op}: {name} must be a scalar, got {s}")
        if s.element_type != shape.element_type:  # rng_c2: of the output's type
            raise ShapeError(f"{op}: {name} {s} must have the output's element type ({shape})")
    allowed = dtypes.FLOATING if op == "RngNormal" else dtypes.FLOATING | dtypes.INTEGRAL | dtypes.PRED
    if shape.element_type not in allowed:  # rng_c3
        kinds = "a floating" if op == "RngNormal" else "a boolean, integral or floating"
        raise ShapeError(f"{op}: the output must have {kinds} element type, got {shape}")
    return shape


def _rng_reference(a, b, *, shape, distribution, ctx):
    dims = shape.dims
    lo, hi = a.item(), b.item()
    if distribution == "rng_normal":
        values = ctx.rng.normal(float(lo), float(hi), size=dims)
    elif shape.element_type in dtypes.FLOATING:
        values = ctx.rng.uniform(float(lo), float(hi), size=dims) if hi > lo else np.full(dims, float(lo))
        # rounding to a narrow type can reach b itself: keep the interval half-open
        values = values.astype(shape.dtype)
        values = np.where(values.astype(np.float64) >= float(hi), np.asarray(lo, shape.dtype), values)
    else:
        lo, hi = int(lo), int(hi)
        values = ctx.rng.integers(lo, hi, size=dims, dtype=shape.dtype) if hi > lo else np.full(dims, lo)
    return np.asarray(values).astype(shape.dtype)


registry.register("rng", "RngUniform", "rng", _rng_shape_rule, _rng_reference,
                  attrs=(Attr("distribution", "str"),),
                  # the output shape is the instruction's result shape in HLO text
                  attrs_from_shape=lambda shape: {"shape": shape},
                  needs_context=True, categories=("rng",))
describe("rng", shape={"kind": "shape"}, example={"a": ("f32[]", 0), "b": ("f32[]", 1), "shape": "f32[2,3]"})
registry.NAMES.setdefault("RngNormal", "rng")


# ---------------------------------------------------------------------------------------
# The counter-based generators, on NumPy arrays of uint32

_M32 = 0xFFFFFFFF
_M64 = 0xFFFFFFFFFFFFFFFF


def _u32(x):
    return np.asarray(x, dtype=np.uint32)


def philox4x32(counter, key):
    """Philox4x32-10: four uint32 arrays (a 128-bit counter, low word first) and a
    two-word key -> four uint32 arrays of random bits."""
    x0, x1, x2, x3 = (_u32(c) for c in counter)
    k0, k1 = int(key[0]) & _M32, int(key[1]) & _M32
    for _ in range(10):
        p0 = x0.astype(np.uint64) * np.uint64(0xD2511F53)  # multiply, keep both halves
        p1 = x2.astype(np.uint64) * np.uint64(0xCD9E8D57)
        hi0, lo0 = (p0 >> np.uint64(32)).astype(np.uint32), p0.astype(np.uint32)
        hi1, lo1 = (p1 >> np.uint64(32)).astype(np.uint32), p1.astype(np.uint32)
        x0, x1, x2, x3 = hi1 ^ x1 ^ np.uint32(k0), lo1, hi0 ^ x3 ^ np.uint32(k1), lo0
        k0, k1 = (k0 + 0x9E3779B9) & _M32, (k1 + 0xBB67AE85) & _M32  # the Weyl key schedule
    return x0, x1, x2, x3


_THREEFRY_ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)


def threefry2x32(counter, key):
    """Threefry2x32 with 20 rounds: two uint32 arrays and a two-word key -> two uint32 arrays."""
    ks = [int(key[0]) & _M32, int(key[1]) & _M32]
    ks.append(0x1BD11BDA ^ ks[0] ^ ks[1])
    x0 = _u32(counter[0]) + np.uint32(ks[0])
    x1 = _u32(counter[1]) + np.uint32(ks[1])
    with np.errstate(over="ignore"):
        for block in range(5):  # 5 blocks of 4 rounds, a key injection after each
            for r in _THREEFRY_ROTATIONS[4 * (block % 2):4 * (block % 2) + 4]:
                x0 = x0 + x1
                x1 = (x1 << np.uint32(r)) | (x1 >> np.uint32(32 - r))
                x1 = x1 ^ x0
            x0 = x0 + np.uint32(ks[(block + 1) % 3])
            x1 = x1 + np.uint32((ks[(block + 2) % 3] + block + 1) & _M32)
    return x0, x1


def _split_words(u64):
    """uint64 array -> (low uint32, high uint32)."""
    u64 = np.asarray(u64, np.uint64)
    return (u64 & np.uint64(_M32)).astype(np.uint32), (u64 >> np.uint64(32)).astype(np.uint32)


def _join_words(lo, hi):
    return lo.astype(np.uint64) | (hi.astype(np.uint64) << np.uint64(32))


def philox_bits(key, counter, dims, bits):
    """XLA's PhiloxBitGenerator: random words of ``bits`` (<=32 or 64) for ``dims`` and
    the advanced 128-bit counter.  Each Philox call on counter+i gives 4 words, used in
    order (call i gives words 4i..4i+3); a 64-bit word joins two 32-bit ones (low first);
    narrower words are the low bits of a 32-bit word."""
    n = int(np.prod(dims, dtype=np.int64))
    words32 = 2 * n if bits == 64 else n
    calls = -(-words32 // 4)
    index = np.arange(calls, dtype=np.uint64)
    lo, hi = counter
    with np.errstate(over="ignore"):
        low = np.uint64(lo) + index  # the 128-bit counter + i, with the carry into the high half
    high = np.where(low < np.uint64(lo), np.uint64((hi + 1) & _M64), np.uint64(hi)).astype(np.uint64)
    c = _split_words(low) + _split_words(high)
    out = philox4x32(c, _split_words(np.uint64(key)))
    if bits == 64:
        pairs = np.stack([_join_words(out[0], out[1]), _join_words(out[2], out[3])], axis=1)
        words = pairs.reshape(-1)[:n]
    else:
        words = np.stack(out, axis=1).reshape(-1)[:n]
    new_low = (lo + calls) & _M64
    new_high = (hi + ((lo + calls) >> 64)) & _M64
    return words.reshape(dims), (new_low, new_high)


def threefry_bits(key, counter, dims, bits, words=None):
    """XLA's ThreeFryBitGenerator: random words of ``bits`` for ``dims`` and the advanced
    64-bit counter.  Element with row-major index i of the generated array uses the 64-bit
    input ``counter + i`` (split into two words).  For 32-bit (and narrower) words XLA
    halves the shape: the first even dimension (else the largest) is cut to ceil(d/2), both
    output words of one call become neighbours along it, and a surplus is sliced off.
    ``words(counter, key, n)`` gives the two u32 outputs of the n calls (the CPU kernel
    passes its compiled version; by default NumPy's ``threefry2x32``)."""
    dims = tuple(int(d) for d in dims)
    if words is None:
        def words(counter, key, n):
            return threefry2x32(_split_words(np.uint64(counter) + np.arange(n, dtype=np.uint64)),
                                _split_words(np.uint64(key)))
    if bits == 64:
        n = int(np.prod(dims, dtype=np.int64))
        x0, x1 = words(counter, key, n)
        return _join_words(x0, x1).reshape(dims), (counter + n) & _M64
    if not dims:
        half = (1,)
        split = 0
    else:
        even = [i for i, d in enumerate(dims) if d % 2 == 0]
        split = even[0] if even else int(np.argmax(dims))
        half = dims[:split] + (-(-dims[split] // 2), 1) + dims[split + 1:]
    n = int(np.prod(half, dtype=np.int64))
    x0, x1 = words(counter, key, n)
    if not dims:
        out = x0.reshape(())
    else:
        pair = np.concatenate([x0.reshape(half), x1.reshape(half)], axis=split + 1)
        full = list(dims)
        full[split] = 2 * half[split]
        out = pair.reshape(full)[tuple(slice(0, d) for d in dims)]
    return out, (counter + n) & _M64


# ---------------------------------------------------------------------------------------
# RngBitGenerator  (HLO `rng-bit-generator`)

ALGORITHMS = ("rng_default", "rng_three_fry", "rng_philox")
_ALGORITHM_NAMES = {"default": "rng_default", "three_fry": "rng_three_fry", "threefry": "rng_three_fry",
                    "philox": "rng_philox"}


def _algorithm_name(algorithm):
    name = str(getattr(algorithm, "name", algorithm)).lower()
    name = name[4:] if name.startswith("rng_") else name
    return _ALGORITHM_NAMES.get(name, str(algorithm))


def RngBitGenerator(algorithm, initial_state, shape):
    """Wraps XLA's RngBitGenerator: an array of ``shape`` of uniformly random bits from
    the counter-based generator ``algorithm`` (``rng_default``, ``rng_philox``,
    ``rng_three_fry``), and the updated state.  Returns the tuple ``(new_state, bits)``.

    The state is ``u64[2]`` = (key, counter) for Threefry, and ``u64[2]`` = (key,
    counter) or ``u64[3]`` = (key, counter low, counter high) for Philox; the new state
    keeps the key and advances the counter past the values used.  The bits are a
    deterministic function of the state (``rng_default`` is Philox on CPU).

    >>> state, bits = RngBitGenerator("rng_default", np.array([1, 2], np.uint64), "u32[2]")
    >>> state
    array([1, 3], dtype=uint64)
    """
    return apply_op("rng-bit-generator", [initial_state],
                    {"algorithm": _algorithm_name(algorithm), "shape": _as_data_shape(shape)})


def _rbg_shape_rule(initial_state, *, algorithm, shape):
    op = "RngBitGenerator"
    if algorithm not in ALGORITHMS:
        raise ShapeError(f"{op}: algorithm={algorithm!r} must be one of {', '.join(ALGORITHMS)}")
    s = initial_state
    if not s.is_array or s.element_type != "u64" or s.rank != 1:  # rbg_c1: a u64 vector
        raise ShapeError(f"{op}: initial_state must be a u64 vector, got {s}")
    sizes = (2,) if algorithm == "rng_three_fry" else (2, 3)
    if s.dims[0] is not None and s.dims[0] not in sizes:  # rbg_c2: the algorithm's state size
        raise ShapeError(f"{op}: {algorithm} needs initial_state u64[{' or u64['.join(map(str, sizes))}], "
                         f"got {s}")
    if not shape.is_array or shape.element_type in dtypes.COMPLEX | dtypes.PRED \
            or dtypes.bit_width(shape.element_type) not in (8, 16, 32, 64):  # rbg_c3
        raise ShapeError(f"{op}: the output must be an array of 8, 16, 32 or 64-bit integers or floats, "
                         f"got {shape}")
    return Shape.tuple([s, shape])


def _rbg_reference(initial_state, *, shape, algorithm, ctx=None):
    state_shape, data_shape = shape.tuple_shapes
    state = [int(v) for v in np.asarray(initial_state, np.uint64)]
    bits = dtypes.bit_width(data_shape.element_type)
    key = state[0]
    if algorithm == "rng_three_fry":
        words, counter = threefry_bits(key, state[1], data_shape.dims, bits)
        new_state = [key, counter]
    else:  # rng_philox, and rng_default (Philox on XLA:CPU)
        # u64[3]: (key, counter low, counter high); u64[2]: the key doubles as the high half
        counter = (state[1], state[2]) if len(state) >= 3 else (state[1], state[0])
        words, (low, high) = philox_bits(key, counter, data_shape.dims, bits)
        new_state = [key, low, high] if len(state) >= 3 else [key, low]
    unsigned = dtypes.to_numpy(dtypes.unsigned_of(data_shape.element_type))
    words = np.asarray(words).astype(unsigned)  # narrow words: the low bits
    return np.array(new_state, np.uint64), words.view(data_shape.dtype)


registry.register("rng-bit-generator", "RngBitGenerator", "rng", _rbg_shape_rule, _rbg_reference,
                  attrs=(Attr("algorithm", "str", default="rng_default", always_print=True),),
                  attrs_from_shape=lambda shape: {"shape": shape.tuple_shapes[1]},
                  categories=("rng",))
describe("rng-bit-generator", algorithm={"kind": "enum", "choices": ALGORITHMS}, shape={"kind": "shape"},
         example={"algorithm": "rng_default", "initial_state": ("u64[2]", [1, 2]), "shape": "u32[2,3]"})

__all__ = ["RngUniform", "RngNormal", "RngBitGenerator"]
