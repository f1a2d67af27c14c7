"""Compiling generated Numba source with an on-disk cache.

Fused loops and kernels specialised to a combiner are generated as Python source.  Each
source is written once to a file named by its hash under the cache directory and
imported from there, so that ``@njit(cache=True)`` caches its machine code next to it:
a fresh process (a new notebook kernel) loads the compiled code instead of compiling.

Caveats of Numba's cache, handled here:
- it does not notice changes in *other* files that a cached function calls (the scalar
  library, ``cpu/half.py``): the cache directory name includes a hash of that file's source, so editing
  it starts a new cache (kernels in ``cpu/*.py`` are cached by Numba beside their own
  files; after editing ``scalar_lib.py``, delete their ``__pycache__`` too);
- a cached function must not read globals that change (generated code reads none), and
  must not call ``numba.get_num_threads()`` (that silently disables caching): the thread
  count is passed in where needed.
"""
import hashlib
import importlib.util
import os
import pathlib
import sys
import threading

_lock = threading.Lock()
_modules = {}


def _dependency_hash():
    # generated modules call only the scalar library and the f16 conversions (everything
    # else they hold is in their own text, which names their file): their source and
    # numba's version key the cache
    here = pathlib.Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in (here / "scalar_lib.py", here / "cpu" / "half.py"):
        h.update(path.read_bytes())
    import numba
    h.update(numba.__version__.encode())
    return h.hexdigest()[:12]


def cache_dir():
    root = os.environ.get("XLA_EXPLORER_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "xla_explorer")
    path = pathlib.Path(root) / f"kernels-{_dependency_hash()}"
    path.mkdir(parents=True, exist_ok=True)
    return path


_dir = None


def load_source(prefix, source):
    """Import generated ``source`` as a module (written once, by content hash)."""
    global _dir
    key = hashlib.sha256(source.encode()).hexdigest()[:16]
    name = f"{prefix}_{key}"
    with _lock:
        if name in _modules:
            return _modules[name]
        if _dir is None:
            _dir = cache_dir()
        path = _dir / f"{name}.py"
        if not path.exists():
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(source)
            os.replace(tmp, path)
        modname = f"xla_explorer_generated.{name}"
        spec = importlib.util.spec_from_file_location(modname, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[modname] = module
        spec.loader.exec_module(module)
        _modules[name] = module
        return module


def interrupted_compile(error):
    """Whether ``error`` (or an exception it came from) is Numba's ``RuntimeError: no
    compiled object yet``: a Ctrl-C (or any signal whose handler raises) delivered while
    LLVM called back into Python to hand over a kernel's machine code.  Python cannot raise
    from that callback: it prints the ``KeyboardInterrupt`` as "Exception ignored", LLVM
    goes on, and Numba -- the kernel compiled and registered in its dispatcher, which works
    -- then fails to write it to its disk cache (nothing is written).  The interrupt is
    what the user asked for: the executor raises it again (the next run uses the kernel)."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, RuntimeError) and str(error).startswith("no compiled object yet"):
            return True
        error = error.__cause__ or error.__context__
    return False
