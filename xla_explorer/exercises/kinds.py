"""The exercise kinds beyond the first five:

- ``"indexing"``: write the dimension numbers of a Gather or Scatter that does an indexing
  described in NumPy (gather_nd, take_along_axis, an embedding lookup, a segment sum, a
  one-hot); judged by running the op with the student's numbers against the NumPy result;
- ``"fix"``: a call raises a ``ShapeError``; from its message, give the attribute value that
  fixes it (and gives the result its author meant);
- ``"implement"``: write the op's reference in NumPy, a Python function; it is run against the
  library's reference on configurations hypothesis generates (seeds and levels of the same
  generator), and the first disagreement, shrunk, is the feedback;
- ``"replicas"``: predict a collective's result on every replica.

Each is an ``Exercise`` subclass registered in ``core.KINDS``; a generator offers a kind by
listing it in ``kinds`` (``fix`` and ``implement`` are added below to the generators they suit).
"""
import inspect
import signal
import threading
import time

import numpy as np

from ..errors import ShapeError
from ..shapes import Shape
from . import core
from .core import (GENERATORS, KINDS, AttributeExercise, Exercise, Feedback, _same_values, index_text, scalar_text,
                   spec_literal, type_text)

core.KIND_TITLES.update({
    "indexing": "write the dimension numbers",
    "fix": "fix the broken call",
    "implement": "implement the op in NumPy",
    "replicas": "predict each replica's result",
})


# =========================================================================================
# indexing: dimension numbers for an indexing described in NumPy
# =========================================================================================

class IndexingExercise(AttributeExercise):
    """The call's dimension numbers are hidden; the prompt says in NumPy what it computes.
    A generator's ``indexing_problem`` gives the call, with ``call.story = (title, numpy
    code)`` and ``call.optional`` (hidden attributes that may be left out: their defaults)."""

    kind = "indexing"

    def setup(self, rng):
        self.hidden = tuple(self.call.hidden)
        self.target = self.call.run()

    def body(self):
        title, numpy_code = self.call.story
        return ([f"{title}. In NumPy:", ""] + ["    " + line for line in numpy_code.split("\n")] + [""]
                + self.call.declarations() + ["", "result = " + self.call.call_text(self.hidden)])

    def question(self):
        names = ", ".join(self.hidden)
        optional = [h for h in self.hidden if h in self.call.optional]
        return (f"Which {names} make the {self.call.api} compute the same result as the NumPy code?\n"
                "Answer a dict, e.g. {\"" + self.hidden[0] + "\": ..., ...}"
                + (f" ({', '.join(optional)} may be left out when empty)" if optional else "") + ".")

    def kind_hint(self):
        return ("Match each dimension of the NumPy result to where it comes from: an index array dimension "
                "(a batch dimension), a slice of the operand (an offset / window dimension), or both arrays "
                "at once (a batching dimension).")

    def step_hint(self):
        return f"The NumPy result is {type_text(self.target)}; " + ", ".join(
            f"{n} is {type_text(v)}" for n, v in self.call.operands) + "."

    def judge(self, answer, reveal):
        if isinstance(answer, str):
            answer = core.parse_literal(answer)
        if isinstance(answer, dict):
            answer = dict({k: v for k, v in self.call.optional.items()}, **answer)
            unknown = sorted(str(k) for k in answer if k not in self.hidden)
            if unknown:
                raise ValueError(f"{', '.join(unknown)} is not one of the attributes asked for ({', '.join(self.hidden)})")
        return super().judge(answer, reveal)

    def code(self):
        return self.call.code(target=self.target)


# =========================================================================================
# fix: from the error message to the attribute that fixes the call
# =========================================================================================

def _attribute_mutations(generator, call):
    """The generator's mutations that break an attribute (not an operand or a computation)."""
    return [(arg, fn) for arg, fn in generator.mutations(call)
            if arg in call.attrs and not isinstance(call.attrs[arg], (core.Computation, Shape))]


def _broken_variant(generator, call, rng):
    muts = _attribute_mutations(generator, call)
    for k in rng.permutation(len(muts)):
        arg, fn = muts[k]
        try:
            broken = fn(call.copy(), rng)
        except Exception:  # noqa: BLE001 - a mutation that does not apply here
            continue
        if broken is not None and arg in broken.attrs and broken.error() is not None:
            broken.broken = arg
            return broken
    return None


class FixExercise(AttributeExercise):
    """A call breaks a rule; its ShapeError is shown with the result its author meant.  The
    answer is a value for the attribute at fault; any value that makes the call legal and
    gives the meant result is right."""

    kind = "fix"

    def setup(self, rng):
        self.intended = self.call
        broken = _broken_variant(self.generator, self.intended, rng)
        for attempt in range(30):  # this problem has no attribute to break: another of the same level
            if broken is not None:
                break
            self.intended = self.generator.problem(
                np.random.default_rng([self.seed, self.level, self.generator._crc, 77, attempt]), self.level, "values")
            broken = _broken_variant(self.generator, self.intended, rng)
        if broken is None:
            raise ValueError(f"{self.opcode}: no attribute of this call can be broken for a fix exercise")
        self.call = broken
        self.hidden = (broken.broken,)
        self.target = self.intended.run()
        self.error = broken.error()

    def _ours(self):
        return {h: self.intended.attrs[h] for h in self.hidden}

    def answer_value(self):
        return self.intended.attrs[self.hidden[0]]

    def body(self):
        head = "meant result = "
        return (self.call.declarations() + ["", self.call.call_text(), "", "raises:", "",
                                             f"    ShapeError: {self.error}", "",
                                             f"{head}{spec_literal(self.target, len(head))};  // "
                                             f"{type_text(self.target)}"])

    def question(self):
        h = self.hidden[0]
        return (f"The error names what is wrong. Which value of {h} fixes the call, so that it gives the meant "
                f"result?\nAnswer the value, of the form {core._form(h, self.intended.attrs[h])}.")

    def kind_hint(self):
        return ("Read the message: it names the op, the argument and the rule broken, with the values; "
                "change only that argument.")

    def step_hint(self):
        return f"The argument at fault is {self.hidden[0]}; the meant result is {type_text(self.target)}."

    def reasoning(self):
        h = self.hidden[0]
        return [f"The error: {self.error}",
                f"{h} = {core.spec_attr(self.intended.attrs[h])} makes the call legal and gives the meant result."] + \
            ([self.generator.formula] if self.generator.formula else [])

    def code(self):
        return self.intended.code()


# =========================================================================================
# implement: the op's reference in NumPy, checked on generated configurations
# =========================================================================================

#: seconds one student function may take on one configuration
CALL_SECONDS = 2.0
#: configurations tried (hypothesis shrinks a failing one to the simplest it can find)
EXAMPLES = 40


class _TooSlow(Exception):
    pass


def _alarm(seconds):
    """A context that interrupts the main thread after ``seconds`` (a student's endless loop)."""
    class _Ctx:
        def __enter__(self):
            self.on = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
            if self.on:
                def fire(signum, frame):
                    raise _TooSlow()
                self.old = signal.signal(signal.SIGALRM, fire)
                signal.setitimer(signal.ITIMER_REAL, seconds)
            return self

        def __exit__(self, *exc):
            if self.on:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, self.old)
            return False
    return _Ctx()


def _keywords(call):
    """The attributes a student's function takes (hints such as indices_are_sorted left out)."""
    return {k: v for k, v in call.attrs.items() if not k.startswith(("indices_are", "unique_ind"))}


class ImplementExercise(Exercise):
    """Write ``def <op>(*operands, **attributes)`` in NumPy.  It is called the way the op's
    Python function is (operands positionally, attributes by keyword, computations as
    Python functions of NumPy scalars) on configurations from this generator at every level,
    drawn by hypothesis, and must return what the library's reference returns."""

    kind = "implement"

    def setup(self, rng):
        self.function_name = self.call.api.lower()

    def signature(self):
        ops = ", ".join(n for n, _ in self.call.operands)
        attrs = ", ".join(_keywords(self.call))
        return f"def {self.function_name}({ops}, *, {attrs}):" if attrs else f"def {self.function_name}({ops}):"

    def body(self):
        return (["An example call:", ""] + self.call.declarations() + ["", self.call.call_text(), "",
                                                                     f"result: {self.call.shape()}"])

    def question(self):
        return (f"Write the op's reference in NumPy:\n\n    {self.signature()}\n        ...\n\n"
                "It is run on many generated configurations and must return what XLA's op returns. "
                "Answer the function itself (define it in a cell, then check(your_function)).")

    def answer_format(self):
        return f"Answer a Python function: {self.signature()} ..."

    def kind_hint(self):
        return "Start from the spec's formula: loop over the result's indices with np.ndindex and read the operand."

    def step_hint(self):
        return f"For the example above the result is {self.call.shape()}; make that case work first."

    def answer_value(self):
        op = self.call.opcode

        def reference(*operands, **attrs):
            return core.apply_op(op, list(operands), attrs)
        reference.__name__ = self.function_name
        return reference

    def reasoning(self):
        from ..ops import registry
        ref = registry.get(self.opcode).reference
        try:
            source = inspect.getsource(ref)
        except (OSError, TypeError):
            source = f"(the reference is {ref.__module__}.{ref.__name__})"
        return [self.generator.formula or self.generator.rule, "xla_explorer's reference:", source]

    def code(self):
        names = [n for n, _ in self.call.operands]
        return (f"import numpy as np\nfrom xla_explorer.builder import apply_op\n\n\n{self.signature()}\n"
                f"    # the library's reference, to compare yours with\n"
                f"    return apply_op({self.opcode!r}, [{', '.join(names)}], "
                + "{" + ", ".join(f"{k!r}: {k}" for k in _keywords(self.call)) + "})\n")

    # -- judging -----------------------------------------------------------------------------
    def _call_for(self, seed, level):
        rng = np.random.default_rng([int(seed), int(level), self.generator._crc])
        return self.generator.problem(rng, level, "values")

    def _try(self, fn, call):
        """None when fn agrees with the reference on call, else a message."""
        want = call.run()
        operands = [np.array(v, copy=True) if isinstance(v, np.ndarray) else v for v in call.values]
        attrs = _keywords(call)  # IMPLEMENTABLE ops have no computations: plain values only
        where = "\n".join(call.declarations() + ["", call.call_text()])
        try:
            with _alarm(CALL_SECONDS):
                got = fn(*operands, **attrs)
        except _TooSlow:
            return f"Your function ran for more than {CALL_SECONDS:g} s on:\n{where}"
        except (Exception, SystemExit) as e:  # noqa: BLE001 - the student's function failing is feedback
            return f"Your function raised {type(e).__name__}: {core.short_repr(str(e))[1:-1]} on:\n{where}"
        try:
            got = np.asarray(core.bounded(got)) if not isinstance(got, np.ndarray) else got
        except Exception as e:  # noqa: BLE001 - unreadable return value
            return f"Your function returned something that is not an array ({e}) on:\n{where}"
        if isinstance(want, tuple):
            return None if isinstance(got, tuple) else "The op returns a tuple of arrays here."
        if got.shape != want.shape:
            return f"Your function returned shape {list(got.shape)}, the op gives {Shape.of(want)}, on:\n{where}"
        same = _same_values(want, got)
        if not np.all(same):
            first = tuple(int(i) for i in np.argwhere(~same)[0])
            return (f"On this configuration result{index_text(first)} is {scalar_text(want[first])}, yours "
                    f"{scalar_text(got[first])}:\n{where}")
        return None

    def judge(self, answer, reveal):
        fn = answer
        if not callable(fn) or isinstance(fn, type):
            raise ValueError("answer a Python function (def ...), not " + type(fn).__name__)
        start = time.perf_counter()
        failure = self._search(fn)
        took = time.perf_counter() - start
        if failure is None:
            return Feedback(True, f"Your function agrees with the op on {EXAMPLES} generated configurations "
                            f"(levels 1-3, {took:.1f} s).", None)
        return Feedback(False, failure + "\n" + (self.generator.formula or self.generator.rule),
                        self.answer_value() if reveal else None)

    def _search(self, fn):
        seen = {}

        def failure_of(seed, level):
            key = (seed, level)
            if key not in seen:
                try:
                    call = self._call_for(seed, level)
                except Exception:  # noqa: BLE001 - a seed the generator does not like: skip it
                    seen[key] = None
                else:
                    seen[key] = self._try(fn, call)
            return seen[key]

        # the exercise's own example first: the cheapest counterexample to read
        first = self._try(fn, self.call)
        if first is not None:
            return first
        try:
            from hypothesis import HealthCheck, Verbosity, find, settings
            from hypothesis import strategies as st
        except ImportError:
            for seed in range(EXAMPLES):
                f = failure_of(seed, 1 + seed % 3)
                if f is not None:
                    return f
            return None
        try:
            seed, level = find(st.tuples(st.integers(0, 10_000), st.sampled_from(core.LEVELS)),
                               lambda sl: failure_of(*sl) is not None,
                               settings=settings(max_examples=EXAMPLES, derandomize=True, database=None,
                                                 deadline=None, verbosity=Verbosity.quiet,
                                                 suppress_health_check=list(HealthCheck)))
        except Exception:  # noqa: BLE001 - hypothesis found no failing configuration (NoSuchExample)
            return None
        return failure_of(seed, level)


# =========================================================================================
# replicas: a collective's result on every replica
# =========================================================================================

class ReplicasExercise(Exercise):
    """Predict what each replica gets from a collective.  The call's ``replicas`` hold each
    replica's operand values; ``call.run_replicated()`` is the judge."""

    kind = "replicas"

    def setup(self, rng):
        self.expected = self.call.run_replicated()

    def body(self):
        lines = []
        for name, value in self.call.operands:
            lines.append(f"let {name}: {type_text(value)};  // one per replica:")
            for d, values in enumerate(self.call.replicas):
                v = dict(zip([n for n, _ in self.call.operands], values))[name]
                head = f"    replica {d}: {name} = "
                lines.append(head + spec_literal(v, len(head)))
        return lines + self.call.declarations(with_values=False)[len(self.call.operands):] + \
            ["", f"run on {len(self.call.replicas)} replicas: " + self.call.call_text()]

    def question(self):
        return ("What does each replica get? Answer a list with one result per replica, in replica order, "
                "e.g. [[1, 2], [3, 4], ...].")

    def kind_hint(self):
        return "Work out who meets whom first (the replica groups or pairs), then what each one sends."

    def step_hint(self):
        return f"Every replica's result is {type_text(self.expected[0])}."

    def answer_value(self):
        return list(self.expected)

    def reasoning(self):
        return self.generator.replica_steps(self.call, self.expected)

    def code(self):
        return self.call.replicated_code()

    def judge(self, answer, reveal):
        if isinstance(answer, str):
            answer = core.parse_literal(answer)
        n = len(self.expected)
        if not isinstance(answer, (list, tuple)) or len(answer) != n:
            raise ValueError(f"answer a list of {n} results, one per replica")
        for d, (want, got) in enumerate(zip(self.expected, answer)):
            a = np.asarray(got)
            if a.dtype == object:
                raise ValueError(f"replica {d}'s rows have different lengths")
            if a.shape != want.shape:
                return Feedback(False, f"Replica {d} gets {type_text(want)}; your answer has sizes {list(a.shape)}."
                                + ("\n" + "\n".join(self.reasoning()) if reveal else "\n" + self.generator.rule),
                                self.answer_value() if reveal else None)
            same = _same_values(want, a)
            if not np.all(same):
                first = tuple(int(i) for i in np.argwhere(~same)[0])
                msg = (f"replica {d}: result{index_text(first)} should be {scalar_text(want[first])}, you wrote "
                       f"{scalar_text(a[first])}" if reveal else
                       f"replica {d}: result{index_text(first)} is not {scalar_text(a[first])}")
                return Feedback(False, msg + ".\n" + ("\n".join(self.reasoning()) if reveal else self.generator.formula),
                                self.answer_value() if reveal else None)
        return Feedback(True, "\n".join(self.reasoning()), self.answer_value())


for _cls in (IndexingExercise, FixExercise, ImplementExercise, ReplicasExercise):
    KINDS[_cls.kind] = _cls
    core._KIND_NUMBER[_cls.kind] = len(core._KIND_NUMBER) + 1


# =========================================================================================
# which generators offer fix and implement
# =========================================================================================

#: ops whose reference a student writes (no computations, plain attributes)
IMPLEMENTABLE = ("slice", "pad", "transpose", "reverse", "concatenate", "broadcast", "dynamic-slice", "gather",
                 "reshape", "copy", "clamp", "select")


def _fixable(generator):
    """True when every level has a call with an attribute that can be broken (seed 0)."""
    if "values" not in generator.kinds and "attribute" not in generator.kinds:
        return False
    for level in core.LEVELS:
        ok = False
        for seed in range(3):
            try:
                call = generator.problem(np.random.default_rng([seed, level, generator._crc]), level, "values")
                ok = _broken_variant(generator, call, np.random.default_rng([seed, 5])) is not None
            except (ShapeError, ValueError, TypeError, KeyError):
                ok = False
            if ok:
                break
        if not ok:
            return False
    return True


def offer_new_kinds():
    for opcode, generator in GENERATORS.items():
        kinds = list(generator.kinds)
        if opcode in IMPLEMENTABLE and "implement" not in kinds:
            kinds.append("implement")
        if "fix" not in kinds and _fixable(generator):
            kinds.append("fix")
        generator.kinds = tuple(kinds)
