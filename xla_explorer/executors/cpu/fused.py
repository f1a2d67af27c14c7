"""Fused element-wise loops on the CPU: generated, compiled once per structure, cached."""
from ..jit_cache import load_source
from ..loopgen import LoopSource
from ..numba_setup import PARALLEL_THRESHOLD, numba

_HEADER = """import math
import cmath
import numpy as np
from numba import njit, prange
from xla_explorer.executors.scalar_lib import *
"""

_compiled = {}


def compile_loop(group):
    """(LoopSource, parallel kernel, serial kernel) for a fusion group."""
    numba()
    src = LoopSource(group)
    key = (src.describe(), tuple(src.arguments()), tuple(src.body_lines()))
    if key in _compiled:
        return src, _compiled[key]
    args = ", ".join(src.arguments())
    body = "\n".join("        " + line for line in src.body_lines())
    text = _HEADER + f"\n{src.describe()}\n"
    for name, par, rng in (("par", "True", "prange"), ("ser", "False", "range")):
        text += (f"\n@njit(cache=True, nogil=True, parallel={par}, error_model='numpy')\n"
                 f"def loop_{name}({args}):\n"
                 f"    for i in {rng}(n):\n{body}\n")
    module = load_source("fused", text)
    _compiled[key] = (module.loop_par, module.loop_ser)
    return src, _compiled[key]


def run_loop(compiled, n, out, inputs, odims, params):
    par, ser = compiled
    (par if n >= PARALLEL_THRESHOLD else ser)(n, out, *inputs, odims, *params)
