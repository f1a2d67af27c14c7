"""Classroom exercises, generated from a seed and a level and checked by the executable spec.

>>> import xla_explorer as xe
>>> ex = xe.exercises.make("gather", seed=3, level=1, kind="shape")
>>> print(ex.prompt)          # the operands and attributes as the spec writes them
>>> ex.check("s32[2,4]")      # Feedback: correct?, and the rule with the values
>>> ex.hint()                  # one more hint each call
>>> make("gather", seed=3, level=1, kind="shape", teacher=True).solution()

Nine kinds of exercise (not every op has all of them; ``available()`` lists them):

- ``"shape"``: predict the result shape (from level 2 the call may be illegal: then the
  answer is "illegal", better with the argument at fault);
- ``"legal"``: is this call legal?  If not, which argument breaks a rule?
- ``"values"``: predict the values of a small result (a collective's: what one replica gets);
- ``"read"``: which operand element does ``result[i, j]`` read (or, for Scatter, where
  does ``updates[i]`` go)?
- ``"attribute"``: find the attribute (``slice_sizes``, ``padding_config``, ...) that
  produces a target;
- ``"indexing"``: write the dimension numbers of a Gather or Scatter that does an indexing
  described in NumPy (an embedding lookup, gather_nd, take_along_axis, a segment sum, a
  one-hot);
- ``"fix"``: a call raises a ShapeError; give the attribute value that fixes it (replica
  groups may be written as the spec writes them, ``"{{0,2},{1,3}}"``; Bitcast's shape as
  ``"s32[2,3]"``);
- ``"implement"``: write the op's reference in NumPy (a function, checked against the
  library's on configurations hypothesis generates; an op's computations, such as Reduce's
  or Sort's comparator, come as Python functions of NumPy scalars);
- ``"replicas"``: predict a collective's result on every replica.

A student's ``check`` says what is wrong and gives a hint, never the right answer; the
teacher's copy (``make(..., teacher=True)``) shows it, and ``solution()``.  Any answer
gets feedback, never an exception (see ``answers``).

Levels: 1 is small and rank 1-2; 2 adds strides, interior padding, clamped starts, more
dimensions; 3 adds batching dimensions, negative padding, dilations, out-of-bounds
starts and skipped updates.

Every answer is judged by the library's own shape rules, NumPy references and index maps
(see ``core``), so an exercise's answer is the spec's.  ``quiz`` assembles a sheet.  The
only optional dependency, ipywidgets, is imported by ``Exercise.widget()`` alone.
"""
import itertools

import numpy as np

from ..ops import registry
from . import collective, control, elementwise, indexing, linalg, more_ops, movement, reduction  # noqa: F401  (register the bank)
from . import kinds as _kinds  # the indexing, fix, implement and replicas kinds
from .core import GENERATORS, KIND_TITLES, LEVELS, Exercise, Feedback, Solution, TeacherOnly, parse_literal

_kinds.offer_new_kinds()


def _opcode(op):
    if op in GENERATORS:
        return op
    if op in registry.NAMES and registry.NAMES[op] in GENERATORS:
        return registry.NAMES[op]
    low = str(op).lower()
    for name, opcode in registry.NAMES.items():
        if name.lower() == low and opcode in GENERATORS:
            return opcode
    for opcode in GENERATORS:
        if opcode.replace("-", "") == low.replace("-", "").replace("_", ""):
            return opcode
    raise KeyError(f"no exercises for {op!r}; the bank has: {', '.join(sorted(GENERATORS))}")


def available():
    """{opcode: kinds} of the exercise bank."""
    return {opcode: tuple(g.kinds) for opcode, g in sorted(GENERATORS.items())}


def make(op, seed=0, level=1, kind=None, teacher=False):
    """One exercise about ``op`` (an HLO opcode such as ``"gather"`` or an API name such as
    ``"DotGeneral"``), the same for the same seed, level and kind.  ``kind`` is one of
    ``available()[op]`` (default: chosen by the seed; see the module doc for the kinds).  ``teacher=True`` makes the
    teacher's copy: its ``check`` shows the right answer and ``solution()`` works."""
    return GENERATORS[_opcode(op)](seed=seed, level=level, kind=kind, teacher=teacher)


class Quiz:
    """A numbered exercise sheet: displays itself, ``check(answers)``, ``score(answers)``;
    ``answer_key()`` for the teacher (a sheet made with ``quiz(..., teacher=True)``)."""

    def __init__(self, exercises, seed=0, teacher=False):
        self.exercises = list(exercises)
        self.seed = seed
        self.teacher = bool(teacher)

    def __len__(self):
        return len(self.exercises)

    def __iter__(self):
        return iter(self.exercises)

    def __getitem__(self, i):
        return self.exercises[i]

    def _answers(self, answers):
        """The first len(self) answers, None for the missing ones (any iterable, never raising)."""
        try:
            got = list(itertools.islice(iter(answers), len(self)))
        except Exception:  # noqa: BLE001 - not a list of answers: nothing answered
            got = []
        return got + [None] * (len(self) - len(got))

    def check(self, answers, teacher=None, *, reveal=None):
        """Feedback for each answer (None: not answered); the right answers only for a teacher."""
        show = self.teacher if teacher is None else bool(teacher)
        show = show if reveal is None else bool(reveal)
        return [Feedback(False, "not answered") if a is None else ex.check(a, show)
                for ex, a in zip(self.exercises, self._answers(answers))]

    def score(self, answers):
        return sum(f.correct for f in self.check(answers, False))

    def answer_key(self, teacher=None):
        """Each exercise's answer and reasoning, for the teacher."""
        if not (self.teacher if teacher is None else teacher):
            raise TeacherOnly("the answer key is for the teacher: quiz(..., teacher=True).answer_key(), "
                              "or answer_key(teacher=True)")
        return "\n\n".join(f"{i + 1}. {ex.title}\n{ex.solution(True)}" for i, ex in enumerate(self.exercises))

    def __str__(self):
        return "\n\n".join(f"Exercise {i + 1}. {ex.prompt}" for i, ex in enumerate(self.exercises))

    def __repr__(self):
        return f"<Quiz of {len(self)} exercises, seed={self.seed}>"

    def _repr_markdown_(self):
        return "\n\n---\n\n".join(f"### Exercise {i + 1}\n\n{ex._repr_markdown_()}"
                                    for i, ex in enumerate(self.exercises))

    def _repr_html_(self):
        return "<hr>".join(f"<h3>Exercise {i + 1}</h3>{ex._repr_html_()}" for i, ex in enumerate(self.exercises))


def quiz(ops=None, n=5, seed=0, level=1, kinds=None, teacher=False):
    """A sheet of ``n`` exercises on ``ops`` (default: the whole bank, or the ops that have
    one of ``kinds``), cycling through the ops in a seeded order; ``kinds`` restricts the
    kinds (each op uses those it has); ``teacher=True`` makes the teacher's copy."""
    opcodes = [_opcode(o) for o in ops] if ops else \
        [o for o in sorted(GENERATORS) if kinds is None or set(kinds) & set(GENERATORS[o].kinds)]
    rng = np.random.default_rng([int(seed), 7])
    order = [opcodes[i] for i in rng.permutation(len(opcodes))]
    exercises = []
    for i in range(int(n)):
        gen = GENERATORS[order[i % len(order)]]
        allowed = [k for k in gen.kinds if kinds is None or k in kinds]
        if not allowed:
            raise ValueError(f"{gen.opcode} has none of the kinds {list(kinds)}; it has {', '.join(gen.kinds)}")
        kind = allowed[int(rng.integers(len(allowed)))]
        exercises.append(gen(seed=int(rng.integers(1 << 30)), level=level, kind=kind, teacher=teacher))
    return Quiz(exercises, seed, teacher)


__all__ = ["make", "quiz", "available", "Quiz", "Exercise", "Feedback", "Solution", "parse_literal",
           "KIND_TITLES", "LEVELS", "GENERATORS", "TeacherOnly"]
