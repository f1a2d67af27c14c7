"""The same seed gives the same exercise in a fresh process: every op and kind, the kind chosen
by the seed, a quiz and an assignment's notebook, whatever PYTHONHASHSEED is (no hash() of
strings, no set or dict order decides anything a student sees)."""
import json
import os
import subprocess
import sys

#: run here and in a fresh process: one digest per exercise of the whole bank, at one seed
DIGESTS = r'''
import hashlib, json, re
import xla_explorer.exercises as E
from xla_explorer.exercises.assignment import teacher_notebook

def digest(ex):
    sol = ex.solution(teacher=True)
    answer = "<function>" if callable(sol.answer) else repr(sol.answer)  # a function's repr has its address
    text = "\n".join([ex.kind, ex.prompt, str(sol), answer, "\n".join(ex.hints), ex.code()])
    return hashlib.sha256(text.encode()).hexdigest()[:16]

out = {}
for op, kinds in E.available().items():
    for kind in kinds:
        out[f"{op} {kind}"] = digest(E.make(op, seed=11, level=3, kind=kind, teacher=True))
    out[f"{op} (seed's kind)"] = digest(E.make(op, seed=4, level=2, teacher=True))
out["quiz"] = hashlib.sha256(str(E.quiz(n=8, seed=3, level=2)).encode()).hexdigest()[:16]
nb = teacher_notebook(["gather", "pad", "scatter"], n=6, seed=0)
out["assignment"] = hashlib.sha256(json.dumps(nb, sort_keys=True).encode()).hexdigest()[:16]
'''


def _run_here():
    scope = {}
    exec(compile(DIGESTS, "<digests>", "exec"), scope)  # noqa: S102 - our own code, the same as the subprocess's
    return scope["out"]


def test_every_exercise_is_the_same_in_a_fresh_process_with_another_hash_seed():
    here = _run_here()
    env = dict(os.environ, PYTHONHASHSEED="4242")
    proc = subprocess.run([sys.executable, "-c", DIGESTS + "\nprint(json.dumps(out))"], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    there = json.loads(proc.stdout.strip().splitlines()[-1])
    differ = sorted(k for k in here if here[k] != there.get(k))
    assert not differ, f"different in a fresh process: {differ}"
    assert len(here) > 150 and len(set(here.values())) > 0.9 * len(here)
