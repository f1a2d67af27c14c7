"""Fused element-wise loops as CUDA kernels: one thread per element, bounds-checked."""
import numpy as np

from ... import fpenv
from ..jit_cache import load_source
from ..loopgen import LoopSource
from . import launch_config, run_kernel

_HEADER = """import math
import cmath
import numpy as np
from numba import cuda
from xla_explorer.executors.scalar_lib import *
from xla_explorer.executors.cuda import simulated as _simulated
from xla_explorer.executors.cuda.shape import dot_index, strided_offset
if _simulated():  # the simulator runs kernels as Python: call the helpers' Python functions
    from xla_explorer.executors import scalar_lib as _sl
    globals().update({_k: _v.py_func for _k, _v in vars(_sl).items() if hasattr(_v, "py_func")})
    from xla_explorer.executors.cuda.fused import SIMULATED_MATH as math
"""


class _SimulatedMath:
    """``math`` for kernels the simulator runs as Python: where Python's math raises
    (``log(-1)``, ``sqrt(-1)``, ``sin(inf)``, ``exp(1000)``), the value compiled code gives
    (NaN, +-Inf), from NumPy."""

    _NUMPY = {"sqrt": np.sqrt, "log": np.log, "log1p": np.log1p, "log2": np.log2, "log10": np.log10,
              "exp": np.exp, "expm1": np.expm1, "sin": np.sin, "cos": np.cos, "tan": np.tan, "cosh": np.cosh,
              "sinh": np.sinh, "pow": np.power, "acos": np.arccos, "asin": np.arcsin, "acosh": np.arccosh,
              "atanh": np.arctanh, "fmod": np.fmod, "ldexp": np.ldexp, "hypot": np.hypot}

    def __getattr__(self, name):
        import math
        f = getattr(math, name)
        alt = self._NUMPY.get(name)
        if alt is None:
            return f

        def call(*args):
            try:
                return f(*args)
            except (ValueError, OverflowError):
                with np.errstate(all="ignore"):
                    return float(alt(*args))
        setattr(self, name, call)
        return call


SIMULATED_MATH = _SimulatedMath()

_compiled = {}


def compile_loop(group):
    src = LoopSource(group)
    key = (tuple(src.arguments()), tuple(src.body_lines()))
    if key not in _compiled:
        args = ", ".join(src.arguments())
        body = "\n".join("        " + line for line in src.body_lines())
        text = _HEADER + f"\n{src.describe()}\n\n@cuda.jit\ndef loop({args}):\n" \
                         f"    i = cuda.grid(1)\n    if i < n:\n{body}\n"
        _compiled[key] = load_source("cuda_fused", text).loop
    return src, _compiled[key]


def run_group(backend, group, values):
    from ..numba_executor import _static_params, run_substeps
    if group.kind in ("gather", "dot"):   # no fused gather / transposed dot on CUDA: the steps it replaced
        return run_substeps(group, values, backend)
    mode = fpenv.get_float_env().denormals    # the loop's source depends on it
    prepared = group.__dict__.setdefault("_cuda", {}).get(mode)
    if prepared is None:
        src, loop = compile_loop(group)
        odims, params = _static_params(src)
        params = [backend.cuda.to_device(p) if isinstance(p, np.ndarray) else p for p in params]
        prepared = group._cuda[mode] = (src, loop, backend.cuda.to_device(odims), params)
    src, loop, odims, params = prepared
    shape = group.root.shape
    out = backend.empty(shape.dims, shape.dtype)
    n = out.size
    if n:
        inputs = [backend.to_device(v).flat() for v in values]
        run_kernel(loop, launch_config(n), n, out.flat(), *inputs, odims, *params)
    return out


def compile_source(prefix, source):
    """Import generated CUDA source (kernels and device functions) under the header above,
    written once to the kernel cache; the kernel families build their per-type and
    per-region kernels with it."""
    return load_source(prefix, _HEADER + "\n" + source)
