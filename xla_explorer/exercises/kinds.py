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
import builtins
import inspect
import keyword
import re
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
                + self.call.declarations() + ["", self.call.call_text(self.hidden, prefix="result = ")])

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
    """The generator's mutations that break an attribute (not an operand or a computation; a
    shape only where the generator says a student can write it: Bitcast's)."""
    return [(arg, fn) for arg, fn in generator.mutations(call)
            if arg in call.attrs and not isinstance(call.attrs[arg], core.Computation)
            and (not isinstance(call.attrs[arg], Shape) or arg in generator.shape_attrs)]


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

    def _meant(self, call):
        """The result the call's author meant (a collective's: one per replica)."""
        return call.run()

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
        self.target = self._meant(self.intended)
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
                f"result?\nAnswer the value: {core._form(h, self.intended.attrs[h])}.")

    def kind_hint(self):
        return ("Read the message: it names the op, the argument and the rule broken, with the values; "
                "change only that argument.")

    def step_hint(self):
        return f"The argument at fault is {self.hidden[0]}; the meant result is {type_text(self.target)}."

    def reasoning(self):
        h = self.hidden[0]
        return [f"The error: {self.error}",
                f"{h} = {core.spec_attr(self.intended.attrs[h], h)} makes the call legal and gives the meant result."] + \
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
#: seconds all configurations together may take (a slow but correct function is told so)
TOTAL_SECONDS = 20.0


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
    """The attributes a student's function takes (hints such as indices_are_sorted left out), in
    the order the op's function takes them."""
    from ..ops import registry
    order = []
    for a in registry.get(call.opcode).attrs:
        order += list(getattr(a, "kws", None) or [getattr(a, "kw", None)])
    rank = {k: i for i, k in enumerate(order)}
    items = [(k, v) for k, v in call.attrs.items() if not k.startswith(("indices_are", "unique_ind"))]
    return dict(sorted(items, key=lambda kv: rank.get(kv[0], len(rank))))


def _snake(name):
    """``BroadcastInDim`` -> ``broadcast_in_dim``: the student's function is named like a NumPy one."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def _student_attrs(call):
    """The keyword arguments a student's function gets: attributes as the Python values the op's
    function takes, computations as functions of NumPy scalars."""
    return {k: (v.scalar_function() if isinstance(v, core.Computation) else v) for k, v in _keywords(call).items()}


def _example_args(comp):
    """Small arguments for showing how a computation is called (not a value of the exercise)."""
    n = len(inspect.signature(comp.fn).parameters)
    return [2, 3, 5, 7, 1, 4][:n]


def _py_scalar(a):
    return repr(bool(a)) if isinstance(a, np.bool_) else scalar_text(a)


def _element_text(a, index):
    try:
        return scalar_text(a[index])
    except Exception:  # noqa: BLE001 - a student's array of strings or objects
        return core.short_repr(a[index])


class ImplementExercise(Exercise):
    """Write ``def <op>(*operands, **attributes)`` in NumPy.  It is called the way the op's
    Python function is (operands positionally, attributes by keyword, computations as
    Python functions of NumPy scalars) on configurations from this generator at every level,
    drawn by hypothesis, and must return what the library's reference returns."""

    kind = "implement"

    def setup(self, rng):
        name = self.generator.implement_name or _snake(self.call.api)
        # def map(...) or def slice(...) in a notebook would hide Python's own for the rest of it
        self.function_name = name + "_" if name in vars(builtins) or keyword.iskeyword(name) else name

    def parameters(self):
        """The student's function's positional parameters (``*operands`` where the count varies)."""
        return list(self.generator.implement_operands or [n for n, _ in self.call.operands])

    def signature(self, width=None):
        """``def name(operands, *, attributes):``, wrapped under its parenthesis when longer
        than ``width`` (the prompt's; the one-line form elsewhere)."""
        params = self.parameters()
        attrs = list(_keywords(self.call))
        if attrs and not any(p.startswith("*") for p in params):
            params.append("*")
        head = f"def {self.function_name}("
        line = head + ", ".join(params + attrs) + "):"
        if width is None or len(line) <= width:
            return line
        lines, cur = [], head
        for k, p in enumerate(params + attrs):
            piece = p + ("):" if k == len(params + attrs) - 1 else ", ")
            if len(cur) + len(piece.rstrip()) > width and cur.strip() != head.strip():
                lines.append(cur.rstrip())
                cur = " " * len(head)
            cur += piece
        return "\n".join(lines + [cur])

    def body(self):
        return (["An example call:", ""] + self.call.declarations() + ["", self.call.call_text(), "",
                                                                     f"result: {self.call.shape()}"])

    def _interface(self):
        """How the function is called and what it returns, with this example's values as the
        example of the form."""
        operands = ", ".join(f"{n}: {type_text(v)}" for n, v in self.call.operands)
        if self.generator.implement_operands:
            star = [p[1:] for p in self.parameters() if p.startswith("*")][0]
            how = (f"The operands come positionally as NumPy arrays ({operands} here); *{star} takes "
                   "however many there are (the count changes from one configuration to the next).")
        else:
            how = f"The operands come positionally as NumPy arrays ({operands} here)."
        plain = {k: v for k, v in _keywords(self.call).items() if not isinstance(v, core.Computation)}
        comps = {k: v for k, v in _keywords(self.call).items() if isinstance(v, core.Computation)}
        lines = [how]
        if plain:
            lines.append("The attributes come by keyword as Python values, here "
                         + ", ".join(f"{k}={v!r}" for k, v in plain.items()) + ".")
        for kw, comp in comps.items():
            if self.generator.implement_state:  # While: functions of the loop state, shown on init
                init = self.call.values[0]
                out = comp.scalar_function()(init)
                text = (("(" + ", ".join(_py_scalar(o) for o in out) + ")") if isinstance(out, tuple)
                        else _py_scalar(out))
                lines.append(f"{kw} is a Python function of the loop state (like init: a NumPy scalar, or a tuple "
                             f"of them): here it is {comp.text}, so {kw}(init) returns {text}.")
                continue
            args = [dtype.type(a) for dtype, a in zip(self._param_dtypes(kw), _example_args(comp))]
            example = comp.scalar_function()(*args)
            call = f"{kw}(" + ", ".join(f"np.{np.dtype(type(a)).name}({_py_scalar(a)})" for a in args) + ")"
            lines.append(f"{kw} is a Python function of NumPy scalars that returns a NumPy scalar: here it is "
                         f"{comp.text}, so {call} returns {_py_scalar(example)}.")
        want = self.call.shape()
        if want.is_tuple:
            lines.append(f"Return a tuple of NumPy arrays, one per result ({want} here); any integer or float "
                         "dtype that holds the values will do.")
        else:
            lines.append(f"Return a NumPy array of the result's shape ({want} here); any integer or float "
                         "dtype that holds the values will do.")
        if self.generator.implement_note:
            lines.append(self.generator.implement_note)
        return lines

    def _param_dtypes(self, kw):
        """The NumPy types of a computation's parameters (by the op's own rule)."""
        from ..ops import registry
        op = registry.get(self.opcode)
        try:
            shapes = op.computation_params(kw, [Shape.of(v) for v in self.call.values], self.call.run_attrs())
            return [np.dtype(s.dtype) for s in shapes]
        except Exception:  # noqa: BLE001 - an example only: the first operand's type will do
            return [np.asarray(self.call.values[0]).dtype] * 8

    def question(self):
        sig = "\n".join("    " + line for line in self.signature(width=92).split("\n"))
        return (f"Write the op's reference in NumPy:\n\n{sig}\n        ...\n\n"
                + "\n".join(self._interface()) + "\n"
                + (f"XLA's rule: {self.generator.rule}\n" if self.generator.rule else "")
                + "It is run on the example above and on many generated configurations (levels 1-3), and must "
                "return what XLA's op returns.\n"
                f"Answer the function itself: define it in a cell, then check({self.function_name}).")

    def answer_format(self):
        return f"Answer a Python function: {self.signature()} ..."

    def kind_hint(self):
        if self.generator.implement_hint:
            return self.generator.implement_hint
        return ("Start from the spec's formula: loop over the result's indices with np.ndindex and work out "
                "each element from the operands (for an op that scatters, loop over the updates' or the "
                "source's indices and combine each into the result).")

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
        operands = ", ".join(self.parameters())
        return (f"import numpy as np\nfrom xla_explorer.builder import apply_op\n\n\n{self.signature()}\n"
                f"    # the library's reference, to compare yours with\n"
                f"    return apply_op({self.opcode!r}, [{operands}], "
                + "{" + ", ".join(f"{k!r}: {k}" for k in _keywords(self.call)) + "})\n")

    # -- judging -----------------------------------------------------------------------------
    def _call_for(self, seed, level):
        rng = np.random.default_rng([int(seed), int(level), self.generator._crc])
        return self.generator.problem(rng, level, "values")

    def _try(self, fn, call):
        """None when fn agrees with the reference on call, else a message."""
        want = call.run()
        operands = [np.array(v, copy=True) if isinstance(v, np.ndarray) else v for v in call.values]
        where = "\n".join(call.declarations() + ["", call.call_text()])
        try:
            with _alarm(CALL_SECONDS):
                got = fn(*operands, **_student_attrs(call))
        except _TooSlow:
            return f"Your function ran for more than {CALL_SECONDS:g} s on:\n{where}"
        except (Exception, SystemExit) as e:  # noqa: BLE001 - the student's function failing is feedback
            return f"Your function raised {type(e).__name__}: {core.short_text(e)} on:\n{where}"
        if isinstance(want, tuple):
            if not isinstance(got, (tuple, list)) or len(got) != len(want):
                return (f"The op returns a tuple of {len(want)} arrays here ({Shape.of(want)}); your function "
                        f"returned {core.short_repr(got)}, on:\n{where}")
            parts = [(f"element {k} of the tuple: ", w, g) for k, (w, g) in enumerate(zip(want, got))]
        else:
            parts = [("", want, got)]
        for label, w, g in parts:
            try:
                g = g if isinstance(g, np.ndarray) else np.asarray(core.bounded(g))
            except Exception as e:  # noqa: BLE001 - unreadable return value
                return f"{label}your function returned something that is not an array ({e}), on:\n{where}"
            if g.dtype == object:
                return f"{label}your function returned a ragged or non-numeric array, on:\n{where}"
            if g.shape != w.shape:
                return (f"{label}your function returned shape {list(g.shape)}, the op gives {Shape.of(w)}, "
                        f"on:\n{where}")
            same = _same_values(w, g)
            if not np.all(same):
                bad = np.argwhere(~same)
                first = tuple(int(i) for i in bad[0])
                more = (f" ({len(bad) - 1} more element{'s differ' if len(bad) > 2 else ' differs'})"
                        if len(bad) > 1 else "")
                what = f"result{index_text(first)}" if first else "the result"  # a scalar: no [] to read
                return (f"{label}on this configuration {what} is {scalar_text(w[first])}, "
                        f"yours {_element_text(g, first)}{more}:\n{where}")
        return None

    def judge(self, answer, reveal):
        fn = answer
        if not callable(fn) or isinstance(fn, type):
            raise ValueError("answer a Python function (def ...), not " + type(fn).__name__)
        start = time.perf_counter()
        failure, tried = self._search(fn)
        took = time.perf_counter() - start
        if failure is None:
            return Feedback(True, f"Your function agrees with the op on {tried} configurations "
                            f"(the example and generated ones of levels 1-3, {took:.1f} s).", None)
        rule = "\n".join(r for r in (self.generator.rule, self.generator.formula) if r)
        return Feedback(False, failure[0].upper() + failure[1:] + "\n\nThe rule: " + rule,
                        self.answer_value() if reveal else None)

    def _search(self, fn):
        """(the first disagreement or None, how many configurations were tried)."""
        seen = {}
        start = time.perf_counter()

        def failure_of(seed, level):
            key = (seed, level)
            if key not in seen:
                if time.perf_counter() - start > TOTAL_SECONDS:
                    seen[key] = (f"Your function took more than {TOTAL_SECONDS:g} s for {len(seen)} configurations; "
                                 "make it faster (loops over these small arrays take milliseconds).")
                    return seen[key]
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
            return first, 1
        try:
            from hypothesis import HealthCheck, Verbosity, find, settings
            from hypothesis import strategies as st
        except ImportError:
            for seed in range(EXAMPLES):
                f = failure_of(seed, 1 + seed % 3)
                if f is not None:
                    return f, len(seen) + 1
            return None, len(seen) + 1
        try:
            seed, level = find(st.tuples(st.integers(0, 10_000), st.sampled_from(core.LEVELS)),
                               lambda sl: failure_of(*sl) is not None,
                               settings=settings(max_examples=EXAMPLES, derandomize=True, database=None,
                                                 deadline=None, verbosity=Verbosity.quiet,
                                                 suppress_health_check=list(HealthCheck)))
        except Exception:  # noqa: BLE001 - hypothesis found no failing configuration (NoSuchExample)
            return None, len(seen) + 1
        return failure_of(seed, level), len(seen) + 1


# =========================================================================================
# replicas: a collective's result on every replica
# =========================================================================================

def replica_declarations(call):
    """Each replica's operand values, then the call's other declarations (its computations)."""
    lines = []
    for name, value in call.operands:
        lines.append(f"let {name}: {type_text(value)};  // one per replica:")
        for d, values in enumerate(call.replicas):
            v = dict(zip([n for n, _ in call.operands], values))[name]
            head = f"    replica {d}: {name} = "
            lines.append(head + spec_literal(v, len(head)))
    return lines + call.declarations(with_values=False)[len(call.operands):]


class ReplicasExercise(Exercise):
    """Predict what each replica gets from a collective.  The call's ``replicas`` hold each
    replica's operand values; ``call.run_replicated()`` is the judge."""

    kind = "replicas"

    def setup(self, rng):
        self.expected = self.call.run_replicated()

    def body(self):
        return replica_declarations(self.call) + ["", self.call.call_text(
            prefix=f"run on {len(self.call.replicas)} replicas: ")]

    def question(self):
        rank = np.ndim(self.expected[0])
        example = {0: "[1, 2, ...]", 1: "[[1, 2], [3, 4], ...]"}.get(rank, "[[[1, 2], ...], [[3, 4], ...], ...]")
        return ("What does each replica get? Answer a list with one result per replica, in replica order, "
                f"e.g. {example}.")

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

#: ops whose reference a student writes (computations come as Python functions of NumPy scalars)
IMPLEMENTABLE = ("slice", "pad", "transpose", "reverse", "concatenate", "broadcast", "dynamic-slice", "gather",
                 "reshape", "copy", "clamp", "select",
                 "reduce", "reduce-window", "scatter", "sort", "map", "select-and-scatter", "while")


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
