#!/usr/bin/env python3
"""Probe xla_explorer as a new user would, with thousands of bad inputs, and count what
goes wrong (the reliability issue's table).

    python scripts/probe_reliability.py                  # every category, counts per category
    python scripts/probe_reliability.py --only builder --max 2000 --show 5

Categories:
  builder  every registered op, eager, symbolic and through apply_op: each attribute of
           its schema set to illegal values made from the schema's kind, each operand
           replaced by None, text, objects, an op of another builder; Parameter and
           Constant with bad numbers, shapes and values
  run      comp.run with bad arguments (None, text, 2.9 for s32, out-of-range integers,
           wrong shapes and dtypes, bools, wrong counts) on numpy and numba, and modules
           whose values are huge
  parser   the HLO corpus with random hand-edits, parsed and run on numpy and numba
  widgets  BuilderWidget: every op with illegal argument text and operands, Parameter with
           bad numbers and shapes, bad text in the run box; after each, the widget must
           still add and run an op
  check    every exercise kind's check() with malformed, huge, deep, endless and hostile
           answers (a Feedback within 2 s of CPU, never an exception)

Each case runs in a worker process (tests/fuzzkit.Worker): a crash or a hang is counted,
not fatal.  Findings: crash, hang, memory (a blow-up or MemoryError), bare (an error that
is not one of the project's), unnamed (a project error that names neither the op nor the
line), accepted (an illegal value accepted), disagree (backends give different answers),
modified (an input array was changed).
"""
import argparse
import collections
import os
import random
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

import numpy as np  # noqa: E402

import fuzzkit  # noqa: E402

FINDINGS = ("crash", "hang", "memory", "bare", "unnamed", "accepted", "disagree", "modified")

BAD_OPERANDS = fuzzkit.BAD_OPERANDS


def builder_cases():
    from xla_explorer.ops import registry
    exs = fuzzkit.examples()
    for opcode, items in sorted(exs.items()):
        op = registry.OPS[opcode]
        for index, ex in enumerate(items):
            # the schema's attributes, and the public function's other arguments (sizes, types)
            for kw, kind, required, in_schema in fuzzkit.case_kinds(opcode, index):
                for bad in fuzzkit.bad_values(kind, required):
                    for mode in ("eager", "symbolic", "apply") if in_schema else ("eager", "symbolic"):
                        yield ("op", opcode, index, mode, kw, bad)
            for pos in range(len(ex.args)):
                if fuzzkit.is_operand(ex, pos):
                    for value, must in BAD_OPERANDS:
                        for mode in ("eager", "symbolic"):
                            yield ("operand", opcode, index, mode, pos, fuzzkit.Bad(value, must))
    for case in fuzzkit.builder_api_cases():
        yield ("api", case)


def run_builder(worker, case, backends):
    if case[0] == "api":
        outcome = worker.call_safe("run_api_case", case[1])
        return case[1][0], fuzzkit.classify_op(outcome, case[1][0], case[1][0], fuzzkit.Bad(None, case[1][-1])), \
            outcome
    kind, opcode, index, mode, where, bad = case
    ex = fuzzkit.examples()[opcode][index]
    if kind == "op":
        outcome = worker.call_safe("run_op_case", opcode, index, mode, where, bad.value,
                                   backends if mode != "eager" else ("numpy",))
    else:
        outcome = worker.call_safe("run_operand_case", opcode, index, mode, where, bad.value, backends)
    return opcode, fuzzkit.classify_op(outcome, opcode, ex.api, bad), outcome


def run_cases(worker, corpus, rng, limit):
    """(comp text, args) pairs: corpus modules and small builders, with bad arguments."""
    texts = list(corpus.items())
    cases = []
    for name, text in texts:
        for args, must in fuzzkit.bad_argument_lists(text, rng):
            cases.append((name, text, (args, must)))
    for name, text in fuzzkit.huge_modules():
        cases.append((name, text, None))
    rng.shuffle(cases)
    return cases[:limit]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["builder", "run", "parser", "widgets", "check"], action="append")
    parser.add_argument("--max", type=int, default=0, help="at most this many cases per category (0: all)")
    parser.add_argument("--mutations", type=int, default=30, help="mutated texts per corpus module")
    parser.add_argument("--backends", default="numpy,numba", help="backends symbolic and parsed cases run on")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--show", type=int, default=3, help="findings shown per kind")
    parser.add_argument("--timeout", type=float, default=120,
                        help="seconds a worker may stay silent before its case counts as a hang")
    parser.add_argument("--case-seconds", type=float, default=60,
                        help="seconds after which a case is interrupted in its worker (a never-ending "
                             "While is legal; anything else still running then counts as a hang)")
    parser.add_argument("--progress", type=int, default=0, help="print a line every this many cases")
    parser.add_argument("--findings", help="write every finding (case and outcome) to this file")
    args = parser.parse_args(argv)
    # the worker reads it when it starts; it must stop a case before the worker's own limit
    os.environ["FUZZ_CASE_SECONDS"] = str(min(args.case_seconds, args.timeout * 0.8))
    cats = args.only or ["builder", "run", "parser", "widgets", "check"]
    backends = tuple(args.backends.split(","))
    rng = random.Random(args.seed)
    worker = fuzzkit.Worker(timeout=args.timeout)
    table, shown, everything = {}, collections.defaultdict(list), collections.defaultdict(list)
    corpus = fuzzkit.corpus_texts()
    t0 = time.time()
    # findings are written as they are found, and progress shown, so a long run can be
    # looked at (and cut short) before it ends
    out = open(args.findings, "w", buffering=1) if args.findings else None
    done = [0]

    def tick(verdict, case, outcome):
        done[0] += 1
        if verdict != "fine":
            everything[verdict].append((case, outcome))
            if out:
                out.write(f"{verdict}\t{case!r}\t{outcome!r}\n")
        if args.progress and done[0] % args.progress == 0:
            print(f"{time.time() - t0:.0f} s: {done[0]} cases, findings "
                  f"{dict((k, len(v)) for k, v in everything.items())}", file=sys.stderr, flush=True)

    try:
        if "builder" in cats:
            cases = list(builder_cases())
            if args.max:
                cases = fuzzkit.shuffled(cases, args.seed)[:args.max]
            counts = collections.Counter()
            for case in cases:
                who, verdict, outcome = run_builder(worker, case, backends)
                counts[verdict] += 1
                tick(verdict, case, outcome)
                if verdict != "fine":
                    if len(shown[verdict]) < args.show:
                        shown[verdict].append((case, outcome))
            table["builder, every op, symbolic and eager"] = (len(cases), counts)
        if "run" in cats:
            counts = collections.Counter()
            cases = run_cases(worker, corpus, rng, args.max or 10 ** 9)
            for name, text, bad_args in cases:
                if bad_args is None:
                    outcome = worker.call_safe("run_hlo_case", text, backends)
                    verdict = fuzzkit.classify_hlo(outcome)
                else:
                    outcome = worker.call_safe("run_args_case", text, bad_args[0], backends)
                    verdict = fuzzkit.classify_args(outcome, bad_args[1])
                counts[verdict] += 1
                tick(verdict, (name, repr(bad_args)[:2000]), outcome)
                if verdict != "fine":
                    if len(shown[verdict]) < args.show:
                        shown[verdict].append(((name, repr(bad_args)[:200]), outcome))
            table["comp.run arguments, huge sizes"] = (len(cases), counts)
        if "parser" in cats:
            counts = collections.Counter()
            texts = []
            for name, text in corpus.items():
                for k in range(args.mutations):
                    texts.append((name, fuzzkit.mutations(text, rng, count=1 + k % 3)))
            if args.max:
                texts = fuzzkit.shuffled(texts, args.seed)[:args.max]
            for name, text in texts:
                outcome = worker.call_safe("run_hlo_case", text, backends)
                verdict = fuzzkit.classify_hlo(outcome)
                counts[verdict] += 1
                tick(verdict, (name, text), outcome)
                if verdict != "fine":
                    if len(shown[verdict]) < args.show:
                        shown[verdict].append(((name, text[:3000]), outcome))
            table["HLO parser (mutated real modules)"] = (len(texts), counts)
        for cat, title, make, run, classify in (
                ("widgets", "widgets (BuilderWidget)", fuzzkit.widget_cases, "run_widget_case", fuzzkit.classify_widget),
                ("check", "exercise `check`", fuzzkit.check_cases, "run_check_case", fuzzkit.classify_check)):
            if cat not in cats:
                continue
            cases = make()
            if args.max:
                cases = fuzzkit.shuffled(cases, args.seed)[:args.max]
            counts = collections.Counter()
            for case in cases:
                outcome = worker.call_safe(run, *case)
                verdict = classify(outcome)
                counts[verdict] += 1
                tick(verdict, case, outcome)
                if verdict != "fine":
                    if len(shown[verdict]) < args.show:
                        shown[verdict].append((repr(case)[:300], outcome))
            table[title] = (len(cases), counts)
    finally:
        worker.close()
        if out:
            out.close()
    print(f"\n{time.time() - t0:.0f} s; backends {', '.join(backends)}\n")
    print("| probe | tried | crash | silent wrong result / illegal accepted | memory blow-up | bare or unnamed error |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, (n, c) in table.items():
        print(f"| {name} | {n:,} | {c['crash'] + c['hang']} | {c['accepted'] + c['disagree'] + c['modified']} | "
              f"{c['memory']} | {c['bare'] + c['unnamed']} |")
    for name, (n, c) in table.items():
        print(f"{name}: {dict(c)}")
    for verdict, items in shown.items():
        print(f"\n== {verdict} ==")
        for case, outcome in items:
            print(" ", repr(case)[:400])
            print("    ->", repr(outcome)[:600])
    return 1 if any(c[v] for _, c in table.values() for v in FINDINGS) else 0


if __name__ == "__main__":
    sys.exit(main())
