"""JAX, XLA's Python front end, as a source of HLO (``from_jax``); jax stays optional."""


def _jax():
    try:
        import jax
    except ImportError:
        raise ImportError("from_jax needs jax: pip install 'xla_explorer[jax]' (or pip install jax)") from None
    return jax


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
        text = lowered.as_text(dialect="hlo")
    return parse_hlo(text)
