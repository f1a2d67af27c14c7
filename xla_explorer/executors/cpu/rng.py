"""CPU kernels of the rng family: RngBitGenerator (HLO ``rng-bit-generator``).

Philox4x32-10 and Threefry2x32-20 as the reference writes them (``ops/rng.py``), one
counter per loop iteration, in parallel: every 32-bit operation is done in 64-bit
integers and masked back to 32 bits, so the words wrap exactly as XLA's u32 arithmetic
does and the bits equal the reference's.  How the words are laid out in the result (64-bit
words of two halves, Threefry's halved shape for narrow types) is the reference's own
NumPy code.  ``rng`` (RngUniform / RngNormal) draws from the run's NumPy generator and
stays with the reference (the executor simulates it).
"""
import numpy as np

from ... import dtypes
from ..numba_setup import PARALLEL_THRESHOLD, numba
from . import kernel

nb = numba()
njit, prange = nb.njit, nb.prange
_opts = dict(cache=True, nogil=True)

_M32 = 0xFFFFFFFF


@njit(inline="always", **_opts)
def _philox_block(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 on one 128-bit counter (four words in uint64, low 32 bits used)."""
    x0, x1, x2, x3 = c0, c1, c2, c3
    for _ in range(10):
        p0 = x0 * np.uint64(0xD2511F53)  # both < 2**32: the 64-bit product is exact
        p1 = x2 * np.uint64(0xCD9E8D57)
        hi0, lo0 = p0 >> np.uint64(32), p0 & np.uint64(_M32)
        hi1, lo1 = p1 >> np.uint64(32), p1 & np.uint64(_M32)
        x0, x1, x2, x3 = hi1 ^ x1 ^ k0, lo1, hi0 ^ x3 ^ k1, lo0
        k0 = (k0 + np.uint64(0x9E3779B9)) & np.uint64(_M32)
        k1 = (k1 + np.uint64(0xBB67AE85)) & np.uint64(_M32)
    return x0, x1, x2, x3


@njit(inline="always", **_opts)
def _philox_at(i, lo, hi, k0, k1, out):
    low = lo + np.uint64(i)                       # wraps modulo 2**64
    high = hi + np.uint64(1) if low < lo else hi  # the carry into the high half
    x0, x1, x2, x3 = _philox_block(low & np.uint64(_M32), low >> np.uint64(32), high & np.uint64(_M32),
                                   high >> np.uint64(32), k0, k1)
    out[4 * i] = x0
    out[4 * i + 1] = x1
    out[4 * i + 2] = x2
    out[4 * i + 3] = x3


@njit(**_opts)
def philox_words(calls, lo, hi, key, out):
    """out[4i:4i+4] = Philox4x32-10(counter (hi, lo) + i, key): 32-bit words (in uint64)."""
    for i in range(calls):
        _philox_at(i, lo, hi, key & np.uint64(_M32), key >> np.uint64(32), out)


@njit(parallel=True, **_opts)
def philox_words_par(calls, lo, hi, key, out):
    for i in prange(calls):
        _philox_at(i, lo, hi, key & np.uint64(_M32), key >> np.uint64(32), out)


@njit(inline="always", **_opts)
def _rotl(x, r):
    return ((x << np.uint64(r)) | (x >> np.uint64(32 - r))) & np.uint64(_M32)


@njit(inline="always", **_opts)
def _threefry_at(i, counter, k0, k1, k2, rot, out0, out1):
    m = np.uint64(_M32)
    c = counter + np.uint64(i)
    x0 = ((c & m) + k0) & m
    x1 = ((c >> np.uint64(32)) + k1) & m
    for block in range(5):  # 5 blocks of 4 rounds, a key injection after each
        base = 4 * (block % 2)
        for r in range(4):
            x0 = (x0 + x1) & m
            x1 = _rotl(x1, rot[base + r])
            x1 = x1 ^ x0
        j, k = (block + 1) % 3, (block + 2) % 3
        ka = k0 if j == 0 else (k1 if j == 1 else k2)
        kb = k0 if k == 0 else (k1 if k == 1 else k2)
        x0 = (x0 + ka) & m
        x1 = (x1 + kb + np.uint64(block + 1)) & m
    out0[i] = x0
    out1[i] = x1


@njit(**_opts)
def threefry_words(n, counter, key, out0, out1):
    """(out0[i], out1[i]) = Threefry2x32-20(counter + i split in two words, key)."""
    k0, k1 = key & np.uint64(_M32), key >> np.uint64(32)
    rot = np.array([13, 15, 26, 6, 17, 29, 16, 24], np.uint64)
    for i in range(n):
        _threefry_at(i, counter, k0, k1, np.uint64(0x1BD11BDA) ^ k0 ^ k1, rot, out0, out1)


@njit(parallel=True, **_opts)
def threefry_words_par(n, counter, key, out0, out1):
    k0, k1 = key & np.uint64(_M32), key >> np.uint64(32)
    rot = np.array([13, 15, 26, 6, 17, 29, 16, 24], np.uint64)
    for i in prange(n):
        _threefry_at(i, counter, k0, k1, np.uint64(0x1BD11BDA) ^ k0 ^ k1, rot, out0, out1)


def _philox_bits(key, counter, dims, bits):
    """As ``spec.philox_bits``: the words for ``dims`` and the advanced counter."""
    n = int(np.prod(dims, dtype=np.int64))
    words32 = 2 * n if bits == 64 else n
    calls = -(-words32 // 4)
    lo, hi = counter
    out = np.empty(4 * calls, np.uint64)
    if calls:
        fn = philox_words_par if calls >= PARALLEL_THRESHOLD // 4 else philox_words
        fn(calls, np.uint64(lo), np.uint64(hi), np.uint64(key), out)
    words = out.astype(np.uint32)
    if bits == 64:  # two 32-bit words (low first) make one 64-bit word
        words = words.view(np.uint64)[:n] if words.size else np.zeros(0, np.uint64)
    else:
        words = words[:n]
    new_low = (lo + calls) & 0xFFFFFFFFFFFFFFFF
    new_high = (hi + ((lo + calls) >> 64)) & 0xFFFFFFFFFFFFFFFF
    return words.reshape(dims), (new_low, new_high)


def _threefry(counter, key, n):
    out0, out1 = np.empty(n, np.uint64), np.empty(n, np.uint64)
    if n:
        fn = threefry_words_par if n >= PARALLEL_THRESHOLD // 4 else threefry_words
        fn(n, np.uint64(counter), np.uint64(key), out0, out1)
    return out0.astype(np.uint32), out1.astype(np.uint32)


def _threefry_bits(key, counter, dims, bits):
    """``spec.threefry_bits`` (the halved shape of narrow words included), the words computed
    by the compiled ThreeFry."""
    from ...ops.rng import threefry_bits
    return threefry_bits(key, counter, dims, bits, words=_threefry)


@kernel("rng-bit-generator")
def rng_bit_generator_kernel(initial_state, *, shape, algorithm):
    state_shape, data_shape = shape.tuple_shapes
    state = [int(v) for v in np.asarray(initial_state, np.uint64)]
    bits = dtypes.bit_width(data_shape.element_type)
    key = state[0]
    if algorithm == "rng_three_fry":
        words, counter = _threefry_bits(key, state[1], data_shape.dims, bits)
        new_state = [key, counter]
    else:  # rng_philox, rng_default (Philox on XLA:CPU); u64[2]: the key is the high half
        counter = (state[1], state[2]) if len(state) >= 3 else (state[1], state[0])
        words, (low, high) = _philox_bits(key, counter, data_shape.dims, bits)
        new_state = [key, low, high] if len(state) >= 3 else [key, low]
    unsigned = dtypes.to_numpy(dtypes.unsigned_of(data_shape.element_type))
    words = np.asarray(words).astype(unsigned)
    return np.array(new_state, np.uint64), words.view(data_shape.dtype)

