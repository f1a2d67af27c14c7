#!/usr/bin/env python3
"""Run StableHLO test programs on XLA:CPU (through jaxlib) and on xla_explorer, and compare.

usage:  python scripts/conformance_vs_xla.py [--backends numpy,numba] FILE.mlir ...

FILEs are StableHLO's own tests (a checkout of openxla/stablehlo: ``stablehlo/tests/
interpret/*.mlir``, several ``// -----`` functions each, ``check.expect_*`` on constants; or
``stablehlo/testdata/*.mlir``, JAX-generated, ``@main`` calling ``@inputs``/``@expected``).
Each function is rewritten so that its constants (interpret) or inputs (testdata) become
parameters -- XLA would fold constants at compile time with its evaluator, which keeps
denormals, while programs receive their inputs at run time, where XLA:CPU flushes them --
and so that it returns the values the checks look at.  XLA:CPU runs it (jaxlib's
``compile_and_load``); jaxlib's ``mlir_module_to_xla_computation`` converts it to HLO text,
which ``xe.parse_hlo`` reads and each backend runs on the same inputs.  A program XLA
cannot compile is skipped (each file runs in-process: run one file per process when a
program makes XLA abort).  Needs jax (0.10) and its private ``jax._src`` modules.
"""
import argparse
import os
import re
import sys
import warnings

import numpy as np

warnings.filterwarnings("ignore")
CHECK = re.compile(r"^\s*check\.(expect_eq_const|expect_almost_eq_const|expect_eq|expect_almost_eq|expect_close|"
                   r"expect_serialized_eq)\s+(.*)$")


def _jax():
    import jax
    jax.config.update("jax_enable_x64", True)
    from jax._src import compiler
    from jax._src.interpreters import mlir as jmlir
    from jax._src.lib import _jax, xla_client as xc
    from jax._src.lib.mlir import ir
    import jax.extend as je
    return jax, compiler, jmlir, _jax, xc, ir, je


def run_xla(text, *args):
    jax, compiler, jmlir, _, xc, ir, je = _jax()
    backend = je.backend.get_backend("cpu")
    with jmlir.make_ir_context():
        module = ir.Module.parse(text)
    devices = backend.devices()[:1]
    exe = backend.compile_and_load(module, xc.DeviceList(tuple(devices)),
                                   compiler.get_compile_options(num_replicas=1, num_partitions=1))
    return [np.asarray(o) for o in exe.execute([jax.device_put(a, devices[0]) for a in args])]


def to_hlo(text):
    _, _, jmlir, _jax_mod, _, ir, _ = _jax()
    with jmlir.make_ir_context():
        code = jmlir.module_to_bytecode(ir.Module.parse(text))
    comp = _jax_mod.mlir.mlir_module_to_xla_computation(code, use_tuple_args=False, return_tuple=True)
    return comp.as_hlo_text(print_large_constants=True)


def interpret_case(part):
    """(name, module with the constants as parameters, module of the constants) or None."""
    m = re.search(r"func\.func @(\w+)\(\)\s*\{", part)
    if not m or "func.return" not in part:
        return None
    body = part[m.end():part.rindex("func.return")]
    lines, pending = [], None
    for line in body.splitlines():          # one check per line (their types may come later)
        if pending is not None:
            pending += " " + line.strip()
            if re.search(r":\s*\(?tensor<[^>]*>\)?\s*$", pending) or "->" in line:
                lines.append(pending)
                pending = None
        elif CHECK.match(line) and not re.search(r":\s*\(?tensor<", line):
            pending = line
        else:
            lines.append(line)
    rets, types, consts, keep = [], [], [], []
    for line in lines:
        c = CHECK.match(line)
        const = re.match(r"\s*(%\w+) = stablehlo\.constant (.*) : (tensor<[^>]*>)\s*$", line)
        if c:
            rets.append(re.match(r"(%[\w#:]+)", c.group(2)).group(1))
            t = c.group(2).rsplit(":", 1)[1].strip()
            types.append(t.strip("()").split(",")[0].strip() if c.group(1) in
                         ("expect_eq", "expect_almost_eq", "expect_close") else t)
        elif const:
            consts.append(const.groups())
        else:
            keep.append(line)
    if not rets:
        return None
    args = ", ".join(f"{v}: {t}" for v, _, t in consts)
    main = (f"module {{\nfunc.func public @main({args}) -> ({', '.join(types)}) {{\n" + "\n".join(keep)
            + f"\n  return {', '.join(rets)} : {', '.join(types)}\n}}\n}}")
    inputs = None
    if consts:
        inputs = (f"module {{\nfunc.func public @main() -> ({', '.join(t for *_, t in consts)}) {{\n"
                  + "\n".join(f"  {v} = stablehlo.constant {d} : {t}" for v, d, t in consts)
                  + f"\n  return {', '.join(v for v, *_ in consts)} : {', '.join(t for *_, t in consts)}\n}}\n}}")
    return m.group(1), main, inputs


def testdata_case(text):
    """(module whose @inputs() are parameters, the inputs' module) of a JAX testdata file."""
    text = "\n".join(line for line in text.splitlines() if "@check." not in line)
    m = re.search(r"(%\w+)(?::(\d+))? = call @inputs\(\) : \(\) -> \(?(.*?)\)?\n", text)
    if not m:
        return text, None
    name, count = m.group(1), int(m.group(2) or 1)
    types = [t.strip() for t in re.split(r",\s*(?=tensor)", m.group(3))]
    results = ", ".join(f"{name}#{k}" if count > 1 else name for k in range(count))
    inputs = re.sub(r"func\.func public @main\(\) -> \((.*?)\) \{.*?\n  \}\n",
                    lambda _: f"func.func public @main() -> ({', '.join(types)}) {{\n    {m.group(0).strip()}\n"
                              f"    return {results} : {', '.join(types)}\n  }}\n", text, count=1, flags=re.S)
    main = text.replace(m.group(0), "")
    params = ", ".join(f"%xin{k}: {t}" for k, t in enumerate(types))
    main = re.sub(r"func\.func public @main\(\)", f"func.func public @main({params})", main, count=1)
    for k in range(count):
        main = main.replace(f"{name}#{k}", f"%xin{k}")
    if count == 1:
        main = re.sub(re.escape(name) + r"(?![\w#])", "%xin0", main)
    return main, inputs


def close(got, want):
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return False
    if want.dtype.kind in "biu":
        return np.array_equal(got, want)
    if want.dtype.kind == "c":
        return close(got.real, want.real) and close(got.imag, want.imag)
    g, w = got.astype(np.float64), want.astype(np.float64)
    rtol = {8: 1e-9, 4: 1e-4}.get(want.dtype.itemsize, 2e-2)
    finite = w[np.isfinite(w)]
    atol = rtol * (np.abs(finite).max() if finite.size else 0)
    return bool(np.all((np.isnan(g) & np.isnan(w)) | (g == w) | np.isclose(g, w, rtol=rtol, atol=atol)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backends", default="numpy")
    parser.add_argument("files", nargs="+")
    opts = parser.parse_args()
    import xla_explorer as xe
    counts = {"pass": 0, "fail": 0, "skip": 0}
    for path in opts.files:
        text = open(path).read()
        cases = ([interpret_case(p) for p in text.split("// -----")] if "@inputs" not in text
                 else [(os.path.basename(path),) + testdata_case(text)])
        for case in cases:
            if case is None:
                continue
            name, module, inputs_module = case
            try:
                inputs = run_xla(inputs_module) if inputs_module else []
                want = run_xla(module, *inputs)
                comp = xe.parse_hlo(to_hlo(module))
            except Exception as e:  # noqa: BLE001 - XLA or the converter refuses it: not a test
                counts["skip"] += 1
                print(f"SKIP {os.path.basename(path)} {name}: {str(e).splitlines()[0][:160]}")
                continue
            for backend in opts.backends.split(","):
                try:
                    got = comp.run(*inputs, backend=backend)
                    got = got if isinstance(got, tuple) else (got,)
                    ok = len(got) == len(want) and all(close(g, w) for g, w in zip(got, want))
                except Exception as e:  # noqa: BLE001 - reported as a failure
                    ok, got = False, f"{type(e).__name__}: {e}"
                counts["pass" if ok else "fail"] += 1
                if not ok:
                    print(f"FAIL {backend} {os.path.basename(path)} {name}\n   XLA  {[np.asarray(w).ravel()[:6] for w in want]}"
                          f"\n   ours {got if isinstance(got, str) else [np.asarray(g).ravel()[:6] for g in got]}")
    print(counts)
    return 1 if counts["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
