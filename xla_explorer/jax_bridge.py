"""JAX, XLA's Python front end, both ways: ``from_jax`` imports what JAX hands to XLA,
``to_jax`` / ``run(..., backend="jax")`` run any computation on real XLA through JAX
(``executors.jax_lowering``), ``XlaComputation.diff`` compares the two instruction by
instruction (``xla_explorer.diff``).  jax stays an optional extra.

Devices: the ``jax`` backend runs partitioned (shard_map / pmap) programs on several
devices.  On CPU XLA makes one device unless asked: when this package is the first to
import jax it adds ``--xla_force_host_platform_device_count=8`` to ``XLA_FLAGS``
(``XLA_EXPLORER_HOST_DEVICES=N`` picks another count, 0 leaves XLA_FLAGS alone); if
jax is already imported but not yet used it sets ``jax_num_cpu_devices`` instead.
"""


def _jax():
    try:
        from .executors.jax_lowering import load
        return load()
    except ImportError:
        raise ImportError("from_jax needs jax: pip install 'xla_explorer[jax]' (or pip install jax)") from None


def from_jax(f, *args, optimized=False, **kwargs):
    """Import ``jax.jit(f)`` lowered for ``args`` as an XlaComputation.

    The HLO is what JAX hands to XLA (``lower(...).as_text(dialect="hlo")``); with
    ``optimized=True`` it is what XLA:CPU compiled (fusions, copies, bitcasts).  ``f`` may
    also be an already lowered or compiled JAX function.
    """
    from .hlo.parser import parse_hlo
    jax = _jax()
    if hasattr(f, "as_text") and not callable(getattr(f, "lower", None)):
        lowered = f
    else:
        lowered = jax.jit(f, keep_unused=True).lower(*args, **kwargs)
    if optimized:
        compiled = lowered.compile() if hasattr(lowered, "compile") else lowered
        text = compiled.as_text()
    else:
        try:  # with debug_info, each instruction's metadata names its JAX op and source line
            text = lowered.as_text(dialect="hlo", debug_info=True)
        except TypeError:  # older jax
            text = lowered.as_text(dialect="hlo")
    return parse_hlo(text)


def to_jax(comp):
    """``comp`` as a jittable Python function of jax arrays (a tuple for a tuple result),
    every instruction a ``jax.lax`` call: ``jax.jit(to_jax(comp))(x, y)``.  A module
    with 64-bit values needs ``jax_enable_x64``.  ``from_jax(to_jax(comp), *args)``
    gives back an equivalent computation."""
    from .executors.jax_lowering import lower_module
    return lower_module(comp)


def run_jax(comp, args, jit=True, cache=True):
    """The ``jax`` backend of ``comp.run``: NumPy in, NumPy out (exact types), XLA in between."""
    from .executors.jax_lowering import run
    return run(comp, args, jit=jit, cache=cache)


__all__ = ["from_jax", "to_jax", "run_jax"]


def load_jax():
    """``jax``, imported with several host devices (see the module docstring): use it instead
    of ``import jax`` when a program needs more than one CPU device."""
    return _jax()
