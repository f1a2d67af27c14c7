"""``XlaComputation``: an HLO module (an entry computation and what it calls), runnable."""
from .hlo.ir import computation_closure

#: backend name -> "module:function" running (module, args, **options)
BACKENDS = {
    "numpy": "xla_explorer.executors.reference:run",
    "numba": "xla_explorer.executors.numba_executor:run_numba",
    "cuda": "xla_explorer.executors.numba_executor:run_cuda",
    "jax": "xla_explorer.jax_bridge:run_jax",
}
_NUMBA = BACKENDS["numba"]   # (run's shortcut to a fast run holds while the entry is this)


class XlaComputation:
    """An HLO module: ``entry`` and the computations it calls, plus module attributes."""

    #: the HLO text's source-location sections ({"StackFrames": [lines], ...}), as parsed
    debug_sections = None

    def __init__(self, entry, name=None, module_attrs=None, computations=None):
        from .hlo import names
        self.name = name or entry.name
        # names unique across the module, as XLA requires (a parsed module's are checked
        # by ``verify``); what the trace keys records by is what the text prints
        if computations is None:
            entry = names.unique_names(entry)
        else:
            names.publish(computations)
        self.entry = entry
        #: raw module-header attributes (entry_computation_layout, frontend_attributes, ...)
        self.module_attrs = dict(module_attrs or {})
        self._computations = computations

    @property
    def computations(self):
        """Every computation of the module, callees first, the entry last."""
        if self._computations is not None:
            return list(self._computations)
        return computation_closure(self.entry)

    def computation(self, name):
        for c in self.computations:
            if c.name == name:
                return c
        raise KeyError(f"no computation named {name!r} in module {self.name!r}")

    def instruction(self, name):
        """Find an instruction by name in any computation of the module."""
        for c in self.computations:
            for inst in c.instructions:
                if inst.name == name:
                    return inst
        raise KeyError(f"no instruction named {name!r} in module {self.name!r}")

    @property
    def parameter_shapes(self):
        return self.entry.parameter_shapes

    @property
    def result_shape(self):
        return self.entry.result_shape

    def program_shape(self):
        return self.entry.signature()

    # -- running ------------------------------------------------------------------------
    def run(self, *args, backend="numpy", denormals=None, **options):
        """Run on NumPy arrays; one array, or a tuple for a tuple-shaped result.

        ``denormals="flush"`` (XLA:CPU's: denormal operands read as 0, denormal results written
        as 0) or ``"ieee"`` sets the floating-point environment of this run only; by default
        the current one (``xe.get_float_env()``, ``xe.float_env(...)``)."""
        if denormals is None:
            if backend == "numba" and not options and BACKENDS["numba"] is _NUMBA:
                # a module run before: its fast run (numba_executor._fast_run), where nothing
                # it decided changed; otherwise run_numba's path (1 us of calls saved a run)
                fast = self.__dict__.get("_numba_fast")
                if fast is not None:
                    out = fast[1](args)
                    if out is not fast[2]:
                        return out
            return _backend(backend)(self, args, **options)
        from .fpenv import float_env
        with float_env(denormals):
            return _backend(backend)(self, args, **options)

    def run_replicated(self, per_replica_args, backend="numpy", **options):
        """Run once per replica (device), collectives exchanging data; one result per replica."""
        from .executors.reference import run_replicated
        return run_replicated(self, per_replica_args, backend=backend, **options)

    def trace(self, *args, keep=None, max_bytes=None, **options):
        """Run the NumPy reference on ``args`` and record every invocation of every
        instruction, in every computation: a ``Trace`` (``t.result``, ``t.get(name, k)``,
        ``t.value(name, k)``, ``t.records`` ...).  ``keep``: instruction names (their
        operands kept too) or a predicate on records; ``max_bytes``: the budget for kept
        values.  See ``xla_explorer.trace``."""
        from .trace import trace
        return trace(self, *args, keep=keep, max_bytes=max_bytes, **options)

    def trace_replicated(self, per_replica_args, keep=None, max_bytes=None, **options):
        """``run_replicated`` traced: ``t.for_device(d)`` is device ``d``'s trace."""
        from .trace import trace_replicated
        return trace_replicated(self, per_replica_args, keep=keep, max_bytes=max_bytes, **options)

    # -- JAX ----------------------------------------------------------------------------
    def to_jax(self):
        """This computation as a jittable function of jax arrays (every op a ``jax.lax`` call)."""
        from .jax_bridge import to_jax
        return to_jax(self)

    def diff(self, *args, against="jax", backend="numpy", **kw):
        """Run ``backend`` and ``against`` instruction by instruction (each on the same
        operand values) and report where they differ: a ``DiffReport``."""
        from .diff import diff
        return diff(self, *args, against=against, backend=backend, **kw)

    # -- text ---------------------------------------------------------------------------
    def as_hlo_text(self):
        from .hlo.printer import print_module
        return print_module(self)

    def __str__(self):
        return self.as_hlo_text()

    def graph(self, **options):
        """The HLO graph (Graphviz): shapes, sub-computations as clusters, values after a run.

        Displays itself in Jupyter; ``.save("g.svg")`` (svg, png, pdf, dot), ``.source``.
        Options: ``args=`` / ``values=``, ``around=`` + ``radius=``, ``path=(a, b)``,
        ``legend=``, ``expand_trivial=`` ... (see ``xla_explorer.render.graph_of``)."""
        from .render import graph_of
        return graph_of(self, **options)

    def __repr__(self):
        return f"<XlaComputation {self.name}: {self.program_shape()}>"

    def fusion_plan(self, fuse=True):
        """How the numba/cuda executors group the entry's instructions into fused loops."""
        from .executors.fusion import fusion_plan, plan_module
        plan_module(self, fuse=fuse)   # the module's budget of fused loops is shared
        return fusion_plan(self.entry, fuse=fuse)

    def verify(self):
        """The check every backend runs first (``hlo.verify``): parameter numbering, operand
        order, every declared shape against its op's shape rule, the size limit."""
        from .hlo.verify import verify_module
        verify_module(self)
        return self


def _backend(name):
    import importlib
    try:
        target = BACKENDS[name]
    except (KeyError, TypeError):
        from .errors import ExecutionError, quote
        raise ExecutionError(f"run: unknown backend {quote(name)}; available: {', '.join(sorted(BACKENDS))}") from None
    if callable(target):
        return target
    fn = _RESOLVED.get(target)
    if fn is None:
        mod, _, name = target.partition(":")
        fn = _RESOLVED[target] = getattr(importlib.import_module(mod), name)
    return fn


#: "module:function" -> the function (importing and looking up took about 3 us a run)
_RESOLVED = {}
