"""CUDA kernel of rng-bit-generator: XLA's Philox4x32-10 and Threefry2x32 on the device.

The generators are ``ops.rng``'s, ported to device functions on 32-bit words held in
uint64 (every constant a uint64 too, so nothing is promoted to a float; products of two
words fit, sums are masked back to 32 bits).  One thread per result element runs the
generator call its element comes from (Philox: element i of a 32-bit result is word
i % 4 of call i // 4; Threefry: see ``threefry_bits``), and one thread advances the
state.  The state is read on the device: nothing goes to the host.  The words become
the result type's carrier with ``elementwise.from_bits``.
"""
import numpy as np

from ... import dtypes
from .elementwise import from_bits
from . import DeviceValue, kernel
from .shape import cuda, host_api, ints, launch, params, prod, single, static_dims

M32 = np.uint64(0xFFFFFFFF)
U32 = np.uint64(32)
_PHILOX_M0, _PHILOX_M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_PHILOX_W0, _PHILOX_W1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
_THREEFRY_PARITY = np.uint64(0x1BD11BDA)


@cuda.jit(device=True)
def add64(a, b):
    """(a + b) mod 2**64 and the carry out, for uint64 a and b (in 32-bit halves)."""
    lo = (a & M32) + (b & M32)
    hi = (a >> U32) + (b >> U32) + (lo >> U32)
    return ((hi & M32) << U32) | (lo & M32), hi >> U32


@cuda.jit(device=True)
def philox4x32(x0, x1, x2, x3, k0, k1):
    for _ in range(10):
        p0 = x0 * _PHILOX_M0        # multiply, keep both halves
        p1 = x2 * _PHILOX_M1
        y0 = (p1 >> U32) ^ x1 ^ k0
        y2 = (p0 >> U32) ^ x3 ^ k1
        x0, x1, x2, x3 = y0, p1 & M32, y2, p0 & M32
        k0 = (k0 + _PHILOX_W0) & M32  # the Weyl key schedule
        k1 = (k1 + _PHILOX_W1) & M32
    return x0, x1, x2, x3


@cuda.jit(device=True)
def _mix(x0, x1, r):
    x0 = (x0 + x1) & M32
    x1 = ((x1 << r) | (x1 >> (U32 - r))) & M32
    return x0, x1 ^ x0


@cuda.jit(device=True)
def _key(k, k0, k1, k2):
    if k == 0:
        return k0
    if k == 1:
        return k1
    return k2


@cuda.jit(device=True)
def threefry2x32(c0, c1, k0, k1):
    """Threefry2x32, 20 rounds: 5 blocks of 4 rounds, a key injection after each."""
    k2 = _THREEFRY_PARITY ^ k0 ^ k1
    x0 = (c0 + k0) & M32
    x1 = (c1 + k1) & M32
    for block in range(5):
        if block % 2 == 0:
            x0, x1 = _mix(x0, x1, np.uint64(13))
            x0, x1 = _mix(x0, x1, np.uint64(15))
            x0, x1 = _mix(x0, x1, np.uint64(26))
            x0, x1 = _mix(x0, x1, np.uint64(6))
        else:
            x0, x1 = _mix(x0, x1, np.uint64(17))
            x0, x1 = _mix(x0, x1, np.uint64(29))
            x0, x1 = _mix(x0, x1, np.uint64(16))
            x0, x1 = _mix(x0, x1, np.uint64(24))
        x0 = (x0 + _key((block + 1) % 3, k0, k1, k2)) & M32
        x1 = (x1 + _key((block + 2) % 3, k0, k1, k2) + np.uint64(block + 1)) & M32
    return x0, x1


# -- Philox ----------------------------------------------------------------------------------------

@cuda.jit
def _philox_words(n, out, state, has_high, bits):
    i = cuda.grid(1)
    if i < n:
        key = np.uint64(state[0])
        low = np.uint64(state[1])
        high = np.uint64(state[0])
        if has_high:
            high = np.uint64(state[2])
        if bits == 64:
            call_index = i // 2
            word = 2 * (i % 2)
        else:
            call_index = i // 4
            word = i % 4
        low, carry = add64(low, np.uint64(call_index))    # the 128-bit counter + call_index
        high, _ = add64(high, carry)
        w0, w1, w2, w3 = philox4x32(low & M32, low >> U32, high & M32, high >> U32, key & M32, key >> U32)
        if word == 0:
            lo, hi = w0, w1
        elif word == 1:
            lo, hi = w1, w2
        elif word == 2:
            lo, hi = w2, w3
        else:
            lo, hi = w3, w0
        if bits == 64:
            out[i] = lo | (hi << U32)
        else:
            out[i] = lo & ((np.uint64(1) << np.uint64(bits)) - np.uint64(1))


@cuda.jit
def _philox_state(state, out, calls, has_high):
    if cuda.grid(1) == 0:
        out[0] = state[0]
        low, carry = add64(np.uint64(state[1]), np.uint64(calls))
        out[1] = low
        if has_high:
            high, _ = add64(np.uint64(state[2]), carry)
            out[2] = high


# -- Threefry -----------------------------------------------------------------------------------

@cuda.jit
def _threefry_words(n, out, state, dims, half, split, bits):
    i = cuda.grid(1)
    if i < n:
        key = np.uint64(state[0])
        if bits == 64:
            call_index = np.uint64(i)
            which = 0
        else:
            # both words of one call are neighbours along dimension `split`
            r = i
            c = 0
            mult = 1
            which = 0
            for d in range(dims.shape[0] - 1, -1, -1):
                x = r % dims[d]
                r //= dims[d]
                if d == split:
                    which = x % 2
                    x //= 2
                c += x * mult
                mult *= half[d]
            call_index = np.uint64(c)
        counter, _ = add64(np.uint64(state[1]), call_index)
        x0, x1 = threefry2x32(counter & M32, counter >> U32, key & M32, key >> U32)
        if bits == 64:
            out[i] = x0 | (x1 << U32)
        else:
            w = x0
            if which == 1:
                w = x1
            out[i] = w & ((np.uint64(1) << np.uint64(bits)) - np.uint64(1))


@cuda.jit
def _threefry_state(state, out, calls):
    if cuda.grid(1) == 0:
        out[0] = state[0]
        counter, _ = add64(np.uint64(state[1]), np.uint64(calls))
        out[1] = counter


def _threefry_layout(dims):
    """XLA halves the shape for words of 32 bits or fewer: the first even dimension (else
    the largest) is cut to ceil(d / 2); (split dimension, halved dims)."""
    if not dims:
        return 0, (1,)
    even = [i for i, d in enumerate(dims) if d % 2 == 0]
    split = even[0] if even else int(np.argmax(dims))
    half = list(dims)
    half[split] = -(-dims[split] // 2)
    return split, tuple(half)


@kernel("rng-bit-generator")
def rng_bit_generator(initial_state, *, shape, algorithm):
    state_shape, data_shape = shape.tuple_shapes
    dims = static_dims(data_shape, "RngBitGenerator")
    bits = dtypes.bit_width(data_shape.element_type)
    n = prod(dims)
    words = host_api.device_array(max(n, 1), np.dtype(f"u{bits // 8}"))
    state = initial_state.flat()
    new_state = host_api.device_array(initial_state.size, np.uint64)
    if algorithm == "rng_three_fry":
        if bits == 64:
            split, half, calls = 0, dims, n
        else:
            split, half = _threefry_layout(dims)
            calls = prod(half)
        dims_d, half_d = params(("threefry", dims, bits), lambda: (ints(dims), ints(half if dims else ())))
        launch(_threefry_words, n, words, state, dims_d, half_d, split, bits)
        single(_threefry_state, state, new_state, calls)
    else:  # rng_philox, and rng_default (Philox on XLA:CPU)
        has_high = initial_state.size >= 3
        words32 = 2 * n if bits == 64 else n
        launch(_philox_words, n, words, state, has_high, bits)
        single(_philox_state, state, new_state, -(-words32 // 4), has_high)
    return (DeviceValue(new_state, np.uint64, state_shape.dims),
            from_bits(words[:n], data_shape.element_type, dims))

