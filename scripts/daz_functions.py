"""Check the f32 functions a fused loop may run in DAZ mode (``executors.loopgen``'s
``_LAZY_F32``, and sqrt / rsqrt) over every f32 bit pattern.

    python scripts/daz_functions.py [NAME ...]      # all 2^32 patterns: about 1 min a function

For each pattern x, ``ftz(f(ftz(x)))`` computed in the processor's default mode (what a loop
without the mode computes, its operand flushed) must have the bits of ``ftz(f(x))`` computed
with MXCSR's denormals-are-zero bit set (what a DAZ loop computes on a lazy operand).  Prints
the count of patterns that differ and the first of them, per function; exits 1 if any does.
``differences`` is what ``tests/test_fused_daz.py`` runs on a sample.  (x86 only: elsewhere
the mode does not exist and the loops never take it.)
"""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from numba import njit  # noqa: E402

from xla_explorer.executors import scalar_lib as sl  # noqa: E402
from xla_explorer.executors.cpu.linalg import _DAZ, _mxcsr_load, _mxcsr_or  # noqa: E402


@njit
def _set_mode(bits):
    return _mxcsr_or(bits)


@njit
def _load_mode(bits):
    _mxcsr_load(bits)


@njit(inline="always")
def _sqrt32(x):
    return np.sqrt(x)


@njit(inline="always")
def _rsqrt32(x):
    return np.float32(1.0) / np.sqrt(x)


#: the emitters' f32 functions (``emit``): exponential, tanh, logistic, log, log-plus-one,
#: sqrt, rsqrt
FUNCTIONS = {"exp_f32": sl.exp_f32, "tanh_f32": sl.tanh_f32, "logistic_f32": sl.logistic_f32,
             "log_f32": sl.log_f32, "log1p_f32": sl.log1p_f32, "sqrt": _sqrt32, "rsqrt": _rsqrt32}

_kernels = {}


def _kernels_of(name):
    got = _kernels.get(name)
    if got is None:
        fn = FUNCTIONS[name]

        @njit(nogil=True, error_model="numpy")
        def flushed_first(xs, out):
            for k in range(xs.size):
                out[k] = sl.ftz32(np.float32(fn(sl.ftz32(xs[k]))))

        @njit(nogil=True, error_model="numpy")
        def raw(xs, out):
            for k in range(xs.size):
                out[k] = sl.ftz32(np.float32(fn(xs[k])))
        got = _kernels[name] = (flushed_first, raw)
    return got


def differences(name, bits):
    """The patterns of ``bits`` (uint32) where function ``name`` differs in DAZ mode."""
    flushed_first, raw = _kernels_of(name)
    a = np.empty(bits.size, np.float32)
    b = np.empty(bits.size, np.float32)
    xs = np.ascontiguousarray(bits, np.uint32).view(np.float32)
    flushed_first(xs, a)
    old = _set_mode(_DAZ)   # (set and restored from Python: nothing of the kernel runs outside it)
    try:
        raw(xs, b)
    finally:
        _load_mode(old)
    return bits[a.view(np.uint32) != b.view(np.uint32)]


def main(names):
    block = 1 << 22
    failed = False
    for name in names or list(FUNCTIONS):
        start, count, first = time.time(), 0, None
        for lo in range(0, 1 << 32, block):
            bad = differences(name, np.arange(lo, lo + block, dtype=np.uint64).astype(np.uint32))
            if bad.size:
                count += bad.size
                first = first if first is not None else int(bad[0])
        failed |= count > 0
        print(f"{name}: {count} patterns differ" + (f" (first 0x{first:08x})" if count else "")
              + f"  [{time.time() - start:.0f} s]", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
