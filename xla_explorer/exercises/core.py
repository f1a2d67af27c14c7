"""The machinery of the exercise bank: calls, prompts, answers, feedback, the five kinds.

An exercise is one concrete op call (a ``Call``: opcode, operand values, attributes) and a
question about it.  Every answer is judged by the library itself, never by a value the
generator wrote down:

- ``shape``: the op's shape rule (``infer_shape``), whose ``ShapeError`` is the answer for
  an illegal call;
- ``legal``: the shape rule again; the error message names the arguments at fault;
- ``values``: the NumPy reference (``apply_op`` on arrays);
- ``read``: the op's index map (``Access.reads``, ``writes``, ``skipped``, ``detail``);
- ``attribute``: running the op with the student's attribute and comparing the result
  with the target the generator's attribute produced.

So a teacher can trust a generated exercise: its answer is the executable spec's.
"""
import html
import re
import zlib

import numpy as np

from ..builder import _trace_computations, apply_op, infer_shape
from ..errors import ShapeError
from ..ops import registry
from ..shapes import Shape
from .answers import AnswerError, bounded, parse_literal, short_repr, short_text

LEVELS = (1, 2, 3)

KIND_TITLES = {
    "shape": "predict the result shape",
    "legal": "is this call legal?",
    "values": "predict the values",
    "read": "which element is read?",
    "attribute": "fill in the attribute",
}

# =========================================================================================
# Showing values and attributes as the spec writes them (and as Python code)
# =========================================================================================


def scalar_text(x):
    """One element as the spec writes it: ``3``, ``2.5``, ``-inf``, ``NaN``, ``true``."""
    x = np.asarray(x)[()]
    if isinstance(x, (bool, np.bool_)):
        return "true" if x else "false"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    f = float(x)
    if np.isnan(f):
        return "NaN"
    if np.isinf(f):
        return "inf" if f > 0 else "-inf"
    if f == int(f) and abs(f) < 1e15:
        return ("-" if np.signbit(f) else "") + f"{abs(int(f))}.0"
    return np.format_float_positional(x, unique=True, trim="-")


def spec_literal(value, column=0):
    """An array (or tuple of arrays) in the spec's brace notation, rows aligned below each
    other when the literal starts at ``column``."""
    if isinstance(value, tuple):
        if all(np.ndim(v) <= 1 for v in value):
            return "(" + ", ".join(spec_literal(v) for v in value) + ")"
        # elements of several rows: one under the other, each aligned after the "("
        return "(" + (",\n" + " " * (column + 1)).join(spec_literal(v, column + 1) for v in value) + ")"
    a = np.asarray(value)
    if a.ndim == 0:
        return scalar_text(a)
    if a.size == 0:
        return "{}"
    texts = [scalar_text(x) for x in a.reshape(-1)]
    width = max(len(t) for t in texts)
    cells = np.array([t.rjust(width) for t in texts], dtype=object).reshape(a.shape)

    def rec(t, depth):
        if t.ndim == 1:
            return "{" + ", ".join(t) + "}"
        return "{" + (",\n" + " " * (column + depth + 1)).join(rec(x, depth + 1) for x in t) + "}"
    return rec(cells, 0)


def type_text(value):
    return str(Shape.of(value))


def _py_scalar(x):
    x = np.asarray(x)[()]
    if isinstance(x, (bool, np.bool_)):
        return repr(bool(x))
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    f = float(x)
    if np.isnan(f):
        return "np.nan"
    if np.isinf(f):
        return "np.inf" if f > 0 else "-np.inf"
    return repr(f)


def py_literal(value):
    """A value as Python code that rebuilds it (``np.array([...], np.int32)``)."""
    if isinstance(value, tuple):
        return "(" + ", ".join(py_literal(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    a = np.asarray(value)
    dtype = "np.bool_" if a.dtype == np.bool_ else f"np.{a.dtype.name}"
    if a.ndim == 0:
        return f"{dtype}({_py_scalar(a)})"

    def rec(x):
        if x.ndim == 0:
            return _py_scalar(x)
        return "[" + ", ".join(rec(y) for y in x) + "]"
    return f"np.array({rec(a)}, {dtype})"


def index_text(index):
    return "[" + ", ".join(str(int(i)) for i in index) + "]"


def plain(v):
    """Detail values (lists of numpy ints, tuples) as short text."""
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(plain(x) for x in v) + "]"
    if isinstance(v, (np.integer, int)) and not isinstance(v, bool):
        return str(int(v))
    return str(v)


# =========================================================================================
# Calls
# =========================================================================================

class Computation:
    """A sub-computation of an exercise: the callable the builder traces, its text in the
    prompt (``add(a, b) = a + b``), its Python code (``lambda a, b: xe.Add(a, b)``) and, for
    an "implement" exercise, the same function on NumPy scalars (``numpy``; without it the
    library's ops run eagerly on the scalars)."""

    def __init__(self, name, fn, text, code, numpy=None):
        self.name, self.fn, self.text, self.code = name, fn, text, code
        self.numpy = numpy

    def scalar_function(self):
        """What a student's implementation receives for this computation: a Python function of
        NumPy scalars returning a NumPy scalar (see ``ScalarFunction``)."""
        return ScalarFunction(self)

    def __repr__(self):
        return self.name


class ScalarFunction:
    """A computation handed to a student's NumPy implementation: called with NumPy scalars (or
    Python numbers) it returns a NumPy scalar; called with XlaOps it records the computation,
    so the library's own reference can take it too.  Its repr is the spec's definition."""

    def __init__(self, computation):
        self._computation = computation
        self.__name__ = computation.name
        self.__doc__ = computation.text

    def __call__(self, *args):
        from ..builder import XlaOp  # here: the builder imports the ops, which import nothing of ours
        comp = self._computation
        if any(isinstance(a, XlaOp) for a in args):
            return comp.fn(*args)
        out = comp.numpy(*args) if comp.numpy is not None else comp.fn(*args)
        if isinstance(out, tuple):
            return tuple(np.asarray(o)[()] for o in out)
        return np.asarray(out)[()]

    def __repr__(self):
        return f"<computation {self._computation.text}>"


class Call:
    """One op call: ``operands`` as ``(name, value)`` pairs in HLO order, ``attrs`` as the
    op's attribute keywords, ``display``: how the call is written, a list of
    ``("operand", name)``, ``("kwoperand", name)``, ``("list", [names])``, ``("attr", kw)`` and
    ``("shown", kw, value)``
    (an argument of the API form that is not an HLO attribute, e.g. Broadcast's sizes)."""

    def __init__(self, opcode, operands, attrs, display, api=None, args=None, note=""):
        self.opcode = opcode
        self.operands = [(name, value) for name, value in operands]
        self.attrs = dict(attrs)
        self.display = list(display)
        self.api = api or registry.get(opcode).name
        #: operand name -> the spec's argument name, where they differ ("start0" -> "start_indices")
        self.args = dict(args or {})
        #: a line under the call (layouts, conventions)
        self.note = note
        #: the argument a mutation changed (legality exercises)
        self.broken = None

    # -- variants --------------------------------------------------------------------------
    def copy(self):
        c = type(self).__new__(type(self))  # subclasses (collective calls) stay what they are
        c.__dict__.update(self.__dict__)
        c.operands, c.attrs, c.display, c.args = list(self.operands), dict(self.attrs), list(self.display), dict(self.args)
        return c

    def with_attrs(self, **changes):
        c = self.copy()
        c.attrs.update(changes)
        return c

    def with_operand(self, name, value):
        c = self.copy()
        c.operands = [(n, value if n == name else v) for n, v in c.operands]
        return c

    # -- what the library says about it -------------------------------------------------------
    @property
    def values(self):
        return [v for _, v in self.operands]

    def value(self, name):
        return dict(self.operands)[name]

    def run_attrs(self, attrs=None):
        attrs = self.attrs if attrs is None else attrs
        return {k: (v.fn if isinstance(v, Computation) else v) for k, v in attrs.items()}

    def _traced(self, attrs=None):
        op = registry.get(self.opcode)
        shapes = [Shape.of(v) for v in self.values]
        return op, shapes, _trace_computations(op, shapes, self.run_attrs(attrs), None)

    def shape(self, attrs=None):
        """The result shape by the op's shape rule (raises its ``ShapeError``)."""
        op, shapes, traced = self._traced(attrs)
        return infer_shape(op, shapes, traced)

    def error(self):
        """The ``ShapeError`` the shape rule raises for this call, or None when it is legal."""
        try:
            self.shape()
        except ShapeError as e:
            return e
        return None

    def run(self, attrs=None):
        """The result by the NumPy reference."""
        return apply_op(self.opcode, self.values, self.run_attrs(attrs))

    def index_map(self):
        op, shapes, traced = self._traced()
        # ops whose attribute is their result shape (bitcast, dynamic-reshape) get it once
        return op.index_map(*self.values, **dict(traced, shape=infer_shape(op, shapes, traced)))

    def argument_names(self):
        names = set()
        for name, _ in self.operands:
            names.add(name)
            names.add(self.args.get(name, name))
        for entry in self.display:
            if entry[0] in ("attr", "shown"):
                names.add(entry[1])
        return names

    # -- text ------------------------------------------------------------------------------
    def _arg_texts(self, hidden=(), python=False):
        out = []
        for entry in self.display:
            if entry[0] == "operand":
                out.append(entry[1])
            elif entry[0] == "kwoperand":  # an operand passed by keyword: While(..., init=init)
                out.append(f"{entry[1]}={entry[1]}")
            elif entry[0] == "pos":  # an argument of the API form passed positionally: its value alone
                out.append(py_attr(entry[2]) if python else spec_attr(entry[2]))
            elif entry[0] == "list":
                out.append(("[" if python else "{") + ", ".join(entry[1]) + ("]" if python else "}"))
            else:
                kw = entry[1]
                value = entry[2] if entry[0] == "shown" else self.attrs[kw]
                text = "?" if kw in hidden else (py_attr(value) if python else spec_attr(value, kw))
                out.append(f"{kw}={text}")
        return out

    def call_text(self, hidden=(), python=False, width=88, prefix=""):
        """The call as the spec writes it (``python``: as xla_explorer's Python), wrapped at
        ``width`` under its parenthesis; ``prefix`` (``"result = "``) starts the first line."""
        name = ("xe." if python else "") + self.api
        return wrap_call(prefix + name, self._arg_texts(hidden, python), width)

    def declarations(self, with_values=True, unknown=()):
        """``let operand: s32[3,4] = {...};`` lines, and the computations' definitions."""
        lines = []
        for name, value in self.operands:
            t = type_text(value)
            if name in unknown:
                lines.append(f"let {name}: {unknown[name]};")
            elif with_values:
                head = f"let {name}: {t} = "
                lines.append(head + spec_literal(value, len(head)) + ";")
            else:
                lines.append(f"let {name}: {t};")
        for v in self.attrs.values():
            if isinstance(v, Computation):
                lines.append(f"computation {v.text}")
        return lines

    def code(self, hidden=(), target=None):
        """Python code that makes this call with xla_explorer (what a student can run)."""
        lines = ["import numpy as np", "import xla_explorer as xe", ""]
        for name, value in self.operands:
            lines.append(f"{name} = {py_literal(value)}")
        if target is not None:
            lines.append(f"target = {py_literal(target)}")
        lines.append("")
        lines.append(self.call_text(hidden, python=True, prefix="result = "))
        return "\n".join(lines)


#: attributes that are lists of id lists, written as the spec and HLO text write them: {{0,2},{1,3}}
ID_LISTS = ("replica_groups", "source_target_pairs")


def id_lists_text(v):
    """``((0, 2), (1, 3))`` as the spec writes replica groups: ``{{0,2},{1,3}}``."""
    return "{" + ",".join("{" + ",".join(str(int(i)) for i in g) + "}" for g in v) + "}"


def spec_attr(v, kw=None):
    """An attribute value as the spec writes it (``kw``, the attribute's name, picks the notation
    of replica groups and source-target pairs)."""
    if kw in ID_LISTS and isinstance(v, (tuple, list)) and all(isinstance(g, (tuple, list)) for g in v):
        return id_lists_text(v)
    if isinstance(v, Computation):
        return v.name
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, str):
        return v
    if isinstance(v, (tuple, list)):
        return "{" + ", ".join(spec_attr(x) if not isinstance(x, (tuple, list)) else
                               "(" + ", ".join(spec_attr(y) for y in x) + ")" for x in v) + "}"
    return str(v)


def py_attr(v):
    if isinstance(v, Computation):
        return v.code
    if isinstance(v, (bool, np.bool_)):
        return repr(bool(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, str):
        return repr(v)
    if isinstance(v, (tuple, list)):
        return "[" + ", ".join(py_attr(x) if not isinstance(x, (tuple, list)) else
                               "(" + ", ".join(py_attr(y) for y in x) + ")" for x in v) + "]"
    return repr(v)


def wrap_call(name, args, width=88):
    one = f"{name}({', '.join(args)})"
    if len(one) <= width:
        return one
    indent = " " * (len(name) + 1)
    lines, line = [], f"{name}("
    for i, a in enumerate(args):
        piece = a + (", " if i < len(args) - 1 else ")")
        if len(line) + len(piece.rstrip()) > width and line.strip() not in (f"{name}(", ""):
            lines.append(line.rstrip())
            line = indent
        line += piece
    lines.append(line)
    return "\n".join(lines)


# =========================================================================================
# Reading answers
# =========================================================================================

# parse_literal and the limits on what an answer may be: see .answers


def unwrap(answer):
    return answer.answer if isinstance(answer, Solution) else answer


def as_index(x):
    """An index answer: ``(1, 2)``, ``[1, 2]``, ``3`` (rank 1) -> a tuple of ints, else None."""
    if isinstance(x, (bool, np.bool_)):
        return None
    if isinstance(x, (int, np.integer)):
        return (int(x),)
    if isinstance(x, np.ndarray):
        x = x.tolist()
    if isinstance(x, (list, tuple)) and all(isinstance(i, (int, np.integer)) and not isinstance(i, bool)
                                            for i in x):
        return tuple(int(i) for i in x)
    return None


# =========================================================================================
# Feedback, solutions
# =========================================================================================

class Feedback:
    """The verdict on one answer: ``correct`` and a ``message`` that teaches (the rule, the
    reasoning, the spec's formula with the values).  True in a boolean context when correct."""

    def __init__(self, correct, message, expected=None):
        self.correct = bool(correct)
        self.message = message
        self.expected = expected

    def __bool__(self):
        return self.correct

    def __str__(self):
        return ("Correct. " if self.correct else "Not quite. ") + self.message

    def __repr__(self):
        return f"<Feedback {'correct' if self.correct else 'wrong'}: {self.message.splitlines()[0][:80]}>"

    def _repr_markdown_(self):
        mark = "✅ **Correct.**" if self.correct else "❌ **Not quite.**"
        return mark + "\n\n```\n" + self.message + "\n```"

    def _repr_html_(self):
        mark = ("<b style='color:#1a7f37'>✅ Correct.</b>" if self.correct
                else "<b style='color:#cf222e'>❌ Not quite.</b>")
        return f"<div>{mark}<pre>{html.escape(self.message)}</pre></div>"


class Solution:
    """An exercise's answer (``.answer``, which ``check`` accepts) and its reasoning."""

    def __init__(self, answer, text, code=""):
        self.answer, self.text, self.code = answer, text, code

    def __str__(self):
        return self.text + ("\n\nRun it yourself:\n\n" + self.code if self.code else "")

    def __repr__(self):
        return f"<Solution {answer_text(self.answer)}>"

    def _repr_markdown_(self):
        out = f"**Answer:** `{answer_text(self.answer)}`\n\n```\n{self.text}\n```"
        if self.code:
            out += f"\n\nRun it yourself:\n\n```python\n{self.code}\n```"
        return out

    def _repr_html_(self):
        out = (f"<div><b>Answer:</b> <code>{html.escape(answer_text(self.answer))}</code>"
               f"<pre>{html.escape(self.text)}</pre>")
        if self.code:
            out += f"<p>Run it yourself:</p><pre>{html.escape(self.code)}</pre>"
        return out + "</div>"


def answer_text(answer):
    if isinstance(answer, np.ndarray) or isinstance(answer, np.generic):
        return spec_literal(answer)
    if isinstance(answer, tuple) and answer and all(isinstance(a, (np.ndarray, np.generic)) for a in answer):
        return spec_literal(answer)
    return str(answer)


# =========================================================================================
# Exercises
# =========================================================================================

class Exercise:
    """One generated exercise: ``prompt``, ``check(answer)``, ``hint()``, ``solution()``."""

    kind = None

    def __init__(self, generator, call, *, seed, level, rng, teacher=False):
        self.generator = generator
        self.opcode = generator.opcode
        self.call = call
        self.seed, self.level = seed, level
        #: made for the teacher: ``check`` shows the right answer, ``solution()`` works
        self.teacher = bool(teacher)
        self._rng = rng
        self._hints_given = 0
        self.setup(rng)

    # -- to fill in by each kind -----------------------------------------------------------
    def setup(self, rng):
        pass

    def question(self):
        raise NotImplementedError

    def body(self):
        """The lines between the title and the question (declarations and the call)."""
        return self.call.declarations() + ["", self.call.call_text()]

    def judge(self, answer, reveal):
        raise NotImplementedError

    def reasoning(self):
        """The full reasoning, the spec's formula with the values, as lines."""
        raise NotImplementedError

    def answer_value(self):
        raise NotImplementedError

    def kind_hint(self):
        return ""

    # -- the public interface ------------------------------------------------------------------
    @property
    def title(self):
        return f"{self.call.api} — {self.generator.titles.get(self.kind, KIND_TITLES[self.kind])}"

    @property
    def prompt(self):
        lines = [f"{self.title} (level {self.level})", ""] + self.body()
        if self.call.note:
            lines += ["", self.call.note]
        return "\n".join(lines + ["", self.question()])

    def check(self, answer, teacher=None, *, reveal=None):
        """Judge ``answer`` by the library's shape rule, reference or index map.

        The feedback says what is wrong and gives a hint (the rule, the formula); it shows
        the right answer only to a teacher: ``teacher=True`` here, or an exercise made with
        ``make(..., teacher=True)`` (``reveal`` is the older name of the same switch).  Any
        answer gets feedback, never an exception: malformed text, huge or deeply nested
        values and endless iterators are refused with a message (see ``answers``)."""
        show = self._shows_answers(teacher, reveal)
        try:
            value = bounded(unwrap(answer))
        except AnswerError as e:
            return Feedback(False, f"I could not read the answer {short_repr(answer)}: {e}.\n{self.answer_format()}")
        try:
            return self.judge(value, show)
        except AnswerError as e:
            return Feedback(False, f"I could not read the answer {short_repr(answer)}: {e}.\n{self.answer_format()}"
                            + self._looks_like(value))
        except (ValueError, TypeError, ShapeError, IndexError, KeyError, ArithmeticError) as e:
            return Feedback(False, f"I could not read the answer {short_repr(answer)}: {short_text(e)}."
                            f"\n{self.answer_format()}" + self._looks_like(value))
        except (RecursionError, MemoryError):
            return Feedback(False, f"The answer {short_repr(answer)} is too big or too deep to judge.\n"
                            + self.answer_format())
        except Exception as e:  # noqa: BLE001 - check never raises: a student sees feedback, not a traceback
            return Feedback(False, f"I could not judge the answer {short_repr(answer)} ({type(e).__name__}: "
                            f"{short_text(e)}).\n{self.answer_format()}")

    def _shows_answers(self, teacher=None, reveal=None):
        if reveal is not None:
            return bool(reveal)
        return self.teacher if teacher is None else bool(teacher)

    def _looks_like(self, value):
        """Why an answer of another kind was not read: the README's ``check("f32[2,4]")``
        on a read exercise answers that this exercise asks for something else."""
        if self.kind != "shape" and isinstance(value, str):
            try:
                looks_shape = Shape.parse(value.strip()).is_array
            except Exception:  # noqa: BLE001 - not shape text
                looks_shape = False
            if looks_shape:
                return (f"\n{value.strip()!r} is a shape, but this exercise asks: "
                        f"{KIND_TITLES.get(self.kind, self.kind)}.")
        return ""

    def answer_format(self):
        return self.question().split("\n")[-1]

    def _hint_line(self):
        """What a student's wrong answer gets instead of the worked solution: the rule to use."""
        hint = self.generator.formula or self.generator.rule or self.kind_hint()
        return "\nHint: " + hint if hint else ""

    def step_hint(self):
        """A hint about this exercise's values that does not give the answer away."""
        return ""

    @property
    def hints(self):
        """Progressive hints: what to look at, the rule, the formula, a step with this
        exercise's values; the first step of the worked solution only for a teacher."""
        hints = [h for h in (self.kind_hint(), self.generator.rule, self.generator.formula, self.step_hint()) if h]
        if self.teacher:
            steps = self.reasoning()
            if steps:
                hints.append("First step: " + steps[0])
        return hints

    def hint(self):
        """The next hint (each call gives one more)."""
        hints = self.hints
        i = min(self._hints_given, len(hints) - 1)
        self._hints_given += 1
        text = f"Hint {i + 1}/{len(hints)}: {hints[i]}"
        if self._hints_given > len(hints):
            text += "\n(no more hints)"
        return text

    def solution(self, teacher=None):
        """The answer and its worked reasoning, for the teacher: ``solution(teacher=True)``,
        or any call on an exercise made with ``make(..., teacher=True)``."""
        if not self._shows_answers(teacher):
            raise TeacherOnly(f"the solution of {self!r} is for the teacher: "
                              "make(..., teacher=True), or ex.solution(teacher=True); "
                              "a student gets ex.hint() and ex.check(answer)")
        return Solution(self.answer_value(), "\n".join(self.reasoning()), self.code())

    def code(self):
        return self.call.code()

    def __repr__(self):
        return f"<Exercise {self.opcode} {self.kind} level={self.level} seed={self.seed}>"

    def __str__(self):
        return self.prompt

    def _repr_markdown_(self):
        lines = self.body() + ([self.call.note] if self.call.note else [])
        return (f"**{html.escape(self.title)}** · level {self.level} · seed {self.seed}\n\n```\n"
                + "\n".join(lines) + "\n```\n\n" + self.question().replace("\n", "  \n"))

    def _repr_html_(self):
        lines = self.body() + ([self.call.note] if self.call.note else [])
        return (f"<div><b>{html.escape(self.title)}</b> · level {self.level} · seed {self.seed}"
                f"<pre>{html.escape(chr(10).join(lines))}</pre>"
                f"<p>{html.escape(self.question()).replace(chr(10), '<br>')}</p></div>")

    def widget(self):
        """An ipywidgets front-end for the student: a text box for the answer, Check and Hint
        buttons.  There is no Solution button, and Check shows the right answer only when
        the exercise was made for the teacher."""
        import ipywidgets as w  # optional dependency, imported only here
        prompt = w.HTML(self._repr_html_())
        implement = self.kind == "implement"  # the answer is a function: its name is typed
        box = w.Text(placeholder=f"the name of your function, e.g. {self.function_name}" if implement
                     else "your answer", layout=w.Layout(width="60%"))
        out = w.HTML()
        check, hint = w.Button(description="Check"), w.Button(description="Hint")

        def on_check(_):
            if implement:
                name = box.value.strip()
                answer = _notebook_function(name)
                if answer is None:
                    out.value = Feedback(False, f"No function named {name!r} in this notebook: define it in a cell "
                                         f"(def {name if name.isidentifier() else self.function_name}(...): ...), run that cell, then type its "
                                         "name here.")._repr_html_()
                    return
            else:
                try:
                    answer = parse_literal(box.value)
                except ValueError:
                    answer = box.value
            out.value = self.check(answer)._repr_html_()

        def on_hint(_):
            out.value = f"<pre>{html.escape(self.hint())}</pre>"
        check.on_click(on_check)
        hint.on_click(on_hint)
        ui = w.VBox([prompt, w.HBox([box, check, hint]), out])
        ui.exercise = self
        ui.answer_box, ui.buttons, ui.output = box, (check, hint), out
        return ui


def _notebook_function(name):
    """The callable a student defined as ``name``: in the notebook's namespace (IPython's), else
    in ``__main__``'s; None when there is none (or ``name`` is no identifier)."""
    if not name.isidentifier():
        return None
    namespaces = []
    try:
        from IPython import get_ipython
        shell = get_ipython()
        if shell is not None:
            namespaces.append(shell.user_ns)
    except ImportError:
        pass
    import __main__
    namespaces.append(vars(__main__))
    for ns in namespaces:
        fn = ns.get(name)
        if callable(fn):
            return fn
    return None


class TeacherOnly(PermissionError):
    """A solution or an answer key asked for without ``teacher=True``."""


def _mutate(generator, call, rng):
    """An illegal variant of ``call`` (a random applicable mutation), or None."""
    mutations = list(generator.mutations(call))
    for k in rng.permutation(len(mutations)):
        arg, fn = mutations[k]
        broken = fn(call.copy(), rng)
        if broken is not None:
            broken.broken = arg
            return broken
    return None


def _culprits(call, error):
    """The arguments of ``call`` the shape rule's message names, and the one mutated; an
    operand counts under its own name and under the spec's ("start0" is a start_indices)."""
    text = str(error)
    found = {n for n in call.argument_names() if re.search(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])", text)}
    if call.broken:
        found.add(call.broken)
    found |= {name for name, arg in call.args.items() if arg in found}
    return found


def _illegal_claim(answer):
    """('legal' | 'illegal' | None, argument or None) from a legality answer."""
    if answer is True:
        return "legal", None
    if answer is False or answer is ShapeError or isinstance(answer, ShapeError):
        return "illegal", None
    if not isinstance(answer, str):
        return None, None
    low = answer.strip().lower()
    if low in ("legal", "yes", "ok", "valid", "true", "it is legal"):
        return "legal", None
    for prefix in ("illegal", "not legal", "invalid", "shapeerror", "error", "no", "false"):
        if low.startswith(prefix):
            rest = answer.strip()[len(prefix):].strip(" :,-=.()")
            return "illegal", (rest.split()[0] if rest else None)
    return "illegal", answer.strip().split()[0]


class ShapeExercise(Exercise):
    """Predict the result shape (level >= 2: the call may be illegal; then the shape rule's
    ShapeError is the answer).  A generator with ``shape_operand`` asks instead for an
    operand's shape that makes the call legal (Scatter's updates)."""

    kind = "shape"

    def setup(self, rng):
        self.target = self.generator.shape_operand
        if self.target is None and self.level >= 2 and rng.random() < 0.25:
            broken = _mutate(self.generator, self.call, rng)
            if broken is not None:
                self.call = broken
        self.error = self.call.error() if self.target is None else None
        self.expected = None if self.error or self.target else self.call.shape()

    def body(self):
        unknown = {}
        if self.target:
            t = Shape.of(self.call.value(self.target))
            unknown[self.target] = f"{t.element_type}[?] (the shape to find)"
        return self.call.declarations(with_values=False, unknown=unknown) + ["", self.call.call_text()]

    def question(self):
        if self.target:
            return (f"Which shape must {self.target} have for this call to be legal?\n"
                    "Answer with shape text such as \"s32[2,3]\" or a tuple of sizes.")
        q = "What is the shape of the result?\nAnswer with shape text such as \"s32[2,3]\" or a tuple of sizes"
        if self.level >= 2:
            q += ("; if the call breaks a rule of the spec, answer \"illegal\", better \"illegal: NAME\" with NAME "
                  "the argument at fault")
        return q + "."

    def kind_hint(self):
        if self.target:
            return f"Work backwards from the rule that relates {self.target}' dimensions to the other arguments."
        return "Go through the result's dimensions one by one: where does each size come from?"

    def step_hint(self):
        if self.target is None and self.level >= 2:
            return "At this level the call may break a rule of the spec: check every rule before you count sizes."
        return ""

    def answer_value(self):
        if self.target:
            return str(Shape.of(self.call.value(self.target)))
        if self.error:
            arg = sorted(_culprits(self.call, self.error), key=lambda a: (a != self.call.broken, a))  # no set order
            return "illegal" + (f": {arg[0]}" if arg else "")
        return str(self.expected)

    def reasoning(self):
        if self.target:
            return self.generator.operand_shape_steps(self.call, self.target)
        if self.error:
            return [f"The shape rule refuses this call: {self.error}"]
        return self.generator.shape_steps(self.call, self.expected)

    def judge(self, answer, reveal):
        if self.expected is not None and self.expected.is_tuple:
            return self._judge_tuple(answer, reveal)
        claim, dims, etype = _shape_answer(answer)
        why = "\n".join(self.reasoning())
        if self.target:
            return self._judge_operand(claim, dims, etype, reveal)
        if self.error:
            if claim == "illegal":
                if dims and dims not in _culprits(self.call, self.error):
                    return Feedback(False, f"Illegal, yes, but {dims} is not what the shape rule complains about"
                                    + (f": {self.error}" if reveal else "; which rule does the call break?"),
                                    self.answer_value() if reveal else None)
                return Feedback(True, f"The call is illegal: {self.error}", self.answer_value())
            return Feedback(False, "This call is illegal, so it has no result shape. "
                            + (str(self.error) if reveal else "Check every rule of the op against the arguments."),
                            self.answer_value() if reveal else None)
        if claim == "illegal":
            return Feedback(False, "The call is legal: every rule of the spec holds."
                            + ("\n" + why if reveal else ""), self.answer_value() if reveal else None)
        if claim is None:
            raise ValueError("expected a shape such as \"s32[2,3]\" or (2, 3)")
        want = self.expected
        if tuple(dims) != tuple(want.dims):
            msg = f"the result has {want.rank} dimensions" if len(dims) != want.rank else \
                f"dimension {_first_diff(dims, want.dims)} is wrong"
            msg = f"Your shape {list(dims)} is not right: {msg}."
            return Feedback(False, msg + ("\n" + why if reveal else "\n" + self.generator.formula),
                            str(want) if reveal else None)
        if etype is not None and etype != want.element_type:
            return Feedback(False, f"The sizes are right, but the element type is {want.element_type}, not {etype}"
                            f" ({self.generator.type_rule})", str(want) if reveal else None)
        return Feedback(True, f"The result is {want}.\n{why}", str(want))

    def _judge_tuple(self, answer, reveal):
        """A tuple-shaped result: the answer is tuple shape text, "(u64[2], u32[3])"."""
        want = self.expected
        if isinstance(answer, str) and answer.strip().lower().startswith("illegal"):
            return Feedback(False, "The call is legal: every rule of the spec holds."
                            + ("\n" + "\n".join(self.reasoning()) if reveal else ""), str(want) if reveal else None)
        if not isinstance(answer, (str, Shape)):
            raise ValueError("the result is a tuple: answer with tuple shape text such as \"(u64[2], u32[3])\"")
        got = answer if isinstance(answer, Shape) else Shape.parse(answer.strip())
        if got == want:
            return Feedback(True, f"The result is {want}.\n" + "\n".join(self.reasoning()), str(want))
        if not got.is_tuple or len(got.tuple_shapes) != len(want.tuple_shapes):
            msg = f"The result is a tuple of {len(want.tuple_shapes)} arrays."
        else:
            k = next(i for i, (a, b) in enumerate(zip(got.tuple_shapes, want.tuple_shapes)) if a != b)
            msg = f"Tuple element {k} of your answer, {got.tuple_shapes[k]}, is not right."
        return Feedback(False, msg + ("\n" + "\n".join(self.reasoning()) if reveal else "\n" + self.generator.rule),
                        str(want) if reveal else None)

    def _judge_operand(self, claim, dims, etype, reveal):
        if claim != "shape":
            raise ValueError("expected a shape such as \"s32[2,3]\" or (2, 3)")
        old = Shape.of(self.call.value(self.target))
        if any(d < 0 for d in dims):
            raise ValueError(f"sizes are never negative, and {list(dims)} has a negative one")
        # a read-only zero-strided array: the shape rule sees the student's shape, however
        # large, and nothing of that size is allocated
        trial_value = np.broadcast_to(np.zeros((), Shape(etype or old.element_type).dtype), dims)
        trial = self.call.with_operand(self.target, trial_value)
        error = trial.error()
        why = "\n".join(self.reasoning())
        if error is None:
            same = tuple(dims) == old.dims
            return Feedback(True, f"{self.target} of shape {Shape(etype or old.element_type, dims)} makes the call "
                            "legal." + ("" if same else f" (The exercise used {old}; several shapes can be legal.)")
                            + "\n" + why, str(old))
        return Feedback(False, f"With {self.target}: {Shape(etype or old.element_type, dims)} the shape rule "
                        f"refuses the call: {error}" + ("\n" + why if reveal else self._hint_line()), str(old) if reveal else None)


def _beyond_sizes(values, arrays):
    """The first integer in ``values`` (an answer's attributes) larger in magnitude than four
    times every dimension of ``arrays`` (plus 16), or None: such an attribute would make the
    reference pad, dilate or stride over arrays far bigger than the exercise."""
    dims = [d for a in arrays for x in (a if isinstance(a, tuple) else (a,)) for d in np.shape(x)]
    limit = 4 * max(dims, default=1) + 16
    stack = list(values.values())
    while stack:
        v = stack.pop()
        if isinstance(v, (list, tuple)):
            stack.extend(v)
        elif isinstance(v, (int, np.integer)) and not isinstance(v, bool) and abs(int(v)) > limit:
            return int(v)
    return None


def _first_diff(a, b):
    return next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)


def _shape_answer(answer):
    """('shape', dims, element type or None) | ('illegal', argument or None, None) | (None,...)"""
    if isinstance(answer, Shape):
        return "shape", tuple(answer.dims), answer.element_type
    if isinstance(answer, (tuple, list, np.ndarray)):
        dims = as_index(answer) if len(answer) else ()
        if dims is not None:
            return "shape", tuple(dims), None
        return None, None, None
    if isinstance(answer, (int, np.integer)) and not isinstance(answer, bool):
        return "shape", (int(answer),), None
    if isinstance(answer, str):
        text = answer.strip()
        try:
            s = Shape.parse(text)
            if s.is_array:
                return "shape", tuple(s.dims), s.element_type
        except Exception:  # noqa: BLE001 - not shape text; try the other forms
            pass
        if re.fullmatch(r"\d+(\s*[x×]\s*\d+)*", text):
            return "shape", tuple(int(x) for x in re.split(r"\s*[x×]\s*", text)), None
        if text in ("()", "[]", "{}"):
            return "shape", (), None
        if re.fullmatch(r"[\[({]\s*\d+(\s*,\s*\d+)*\s*,?\s*[\])}]", text):
            return "shape", tuple(int(x) for x in re.findall(r"\d+", text)), None
    claim, arg = _illegal_claim(answer)
    if claim == "illegal":
        return "illegal", arg, None
    return None, None, None


class LegalExercise(Exercise):
    """Is this call legal?  If not, which argument breaks a rule?  The shape rule decides;
    its message names the rule and the values."""

    kind = "legal"

    def setup(self, rng):
        if rng.random() >= 0.3:
            broken = _mutate(self.generator, self.call, rng)
            if broken is not None:
                self.call = broken
        self.error = self.call.error()

    def body(self):
        return self.call.declarations(with_values=False) + ["", self.call.call_text()]

    def question(self):
        return ("Is this call legal? Answer \"legal\", or \"illegal: NAME\" with NAME the argument (an operand or "
                "an attribute) that breaks a rule of the spec.")

    def kind_hint(self):
        return "Check the op's rules one by one: ranks, sizes, ranges, types; each rule links a few arguments."

    def answer_value(self):
        if self.error is None:
            return "legal"
        arg = sorted(_culprits(self.call, self.error), key=lambda a: (a != self.call.broken, a))  # no set order
        return f"illegal: {arg[0]}" if arg else "illegal"

    def reasoning(self):
        if self.error is None:
            try:
                return ["The shape rule accepts the call; the result is "
                        f"{self.call.shape()}."] + self.generator.shape_steps(self.call, self.call.shape())
            except Exception:  # noqa: BLE001 - shape_steps are only an explanation
                return [f"The shape rule accepts the call; the result is {self.call.shape()}."]
        return [f"The shape rule refuses it: {self.error}"]

    def judge(self, answer, reveal):
        claim, arg = _illegal_claim(answer)
        if claim is None:
            raise ValueError("answer \"legal\" or \"illegal: <argument>\"")
        if self.error is None:
            if claim == "legal":
                return Feedback(True, "\n".join(self.reasoning()), "legal")
            return Feedback(False, "The call is legal: every rule of the spec holds."
                            + ("\n" + "\n".join(self.reasoning()) if reveal else ""),
                            "legal" if reveal else None)
        culprits = _culprits(self.call, self.error)
        if claim == "legal":
            return Feedback(False, "The call is illegal. " + (str(self.error) if reveal else
                            "Look for the rule it breaks."), self.answer_value() if reveal else None)
        if arg is None:
            return Feedback(False, "Yes, it is illegal: now say which argument breaks which rule. "
                            + (str(self.error) if reveal else ""), self.answer_value() if reveal else None)
        if arg in culprits:
            return Feedback(True, f"{arg} breaks a rule: {self.error}", self.answer_value())
        return Feedback(False, f"It is illegal, but {arg} is not what the shape rule complains about. "
                        + (str(self.error) if reveal else "Which rule does it break?"),
                        self.answer_value() if reveal else None)


class ValuesExercise(Exercise):
    """Predict the values of a small result; the NumPy reference is the judge."""

    kind = "values"

    def setup(self, rng):
        self.expected = self.call.run()

    def question(self):
        t = Shape.of(self.expected)
        if isinstance(self.expected, tuple):
            example = "(1, 2)" if all(np.ndim(e) == 0 for e in self.expected) else \
                "([1, 2], [3, 4]), or the spec's ({1, 2}, {3, 4})"
            return f"What is the result? It is a tuple {t}; answer a tuple of values, e.g. {example}."
        return f"What is the result ({t})? Answer with its values, {values_example(np.ndim(self.expected))}."

    def kind_hint(self):
        return "Work out one result element at a time, from the op's formula."

    def step_hint(self):
        return f"The result is {type_text(self.expected)}: find each element in turn."

    def answer_value(self):
        return self.expected

    def reasoning(self):
        return self.generator.values_steps(self.call, self.expected)

    def judge(self, answer, reveal):
        if isinstance(answer, str):
            answer = parse_literal(answer)
        expected = self.expected
        if isinstance(expected, tuple):
            if not isinstance(answer, (tuple, list)) or len(answer) != len(expected):
                raise ValueError(f"expected a tuple of {len(expected)} arrays")
            parts = [(k, e, a) for k, (e, a) in enumerate(zip(expected, answer))]
        else:
            parts = [(None, expected, answer)]
        for k, e, a in parts:
            fb = self._compare(k, e, a, reveal)
            if fb is not None:
                return fb
        return Feedback(True, "\n".join(self.reasoning()), expected)

    def _compare(self, k, expected, answer, reveal):
        where = "" if k is None else f" (tuple element {k})"
        a = np.asarray(answer)
        if a.dtype == object:
            raise ValueError("the rows have different lengths")
        if a.shape != expected.shape:
            return Feedback(False, f"The result{where} has shape {Shape.of(expected)}; your answer has sizes "
                            f"{list(a.shape)}." + ("\n" + "\n".join(self.reasoning()) if reveal else ""),
                            self.expected if reveal else None)
        wrong = ~_same_values(expected, a)
        if not wrong.any():
            return None
        bad = [tuple(int(i) for i in ix) for ix in np.argwhere(wrong)]
        first = bad[0]
        msg = (f"result{where}{index_text(first)} should be {scalar_text(expected[first])}, "
               f"you wrote {scalar_text(a[first])}" if reveal else
               f"result{where}{index_text(first)} is not {scalar_text(a[first])}")
        if len(bad) > 1:
            msg += f" ({len(bad) - 1} more element{'s' if len(bad) > 2 else ''} wrong)"
        steps = self.generator.value_steps(self.call, first, self.expected, k)
        if not reveal:
            steps = [self.generator.formula] if self.generator.formula else []
        return Feedback(False, msg + ".\n" + "\n".join(steps), self.expected if reveal else None)


def values_example(rank):
    """How to write an array of this rank: a number, a list, nested lists (or the spec's braces)."""
    if rank == 0:
        return "a number such as 3 (or true / false)"
    if rank == 1:
        return "e.g. a list [1, 2, 3] or the spec's {1, 2, 3}"
    inner, spec = "[1, 2]", "{1, 2}"
    for _ in range(rank - 1):
        inner, spec = f"[{inner}, ...]", f"{{{spec}, ...}}"
    return f"e.g. nested lists {inner} or the spec's {spec}"


_FIELDS = {"padding_config": ("low", "high", "interior"), "padding": ("low", "high")}


def _form(kw, value):
    """What an attribute's answer looks like, without its value: ``[a, b]``,
    ``[(low, high, interior), (low, high, interior)]``, ``an integer``."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return "an integer"
    if isinstance(value, tuple) and value and isinstance(value[0], tuple):
        fields = _FIELDS.get(kw, tuple("abcdefgh"[:len(value[0])]))
        return "[" + ", ".join("(" + ", ".join(fields) + ")" for _ in value) + "]"
    if isinstance(value, tuple):
        return "[" + ", ".join("abcdefgh"[i] for i in range(len(value))) + "]"
    if isinstance(value, Shape):
        return "a shape: element type and sizes, such as f32[4,2]"
    return "a value"


def _same_values(expected, a):
    e = np.asarray(expected)
    if e.dtype == np.bool_:
        if a.dtype.kind not in "biu":
            return np.zeros(e.shape, bool)
        return e == a.astype(bool)
    if e.dtype.kind in "iu":
        if a.dtype.kind == "f":
            integral = np.isfinite(a) & (a == np.round(a))
            return integral & (np.where(integral, a, 0).astype(np.float64) == e.astype(np.float64))
        if a.dtype.kind not in "iub":
            return np.zeros(e.shape, bool)
        return a.astype(object) == e.astype(object) if a.size else np.ones(e.shape, bool)
    if a.dtype.kind not in "iufb":
        return np.zeros(e.shape, bool)
    ef, af = e.astype(np.float64), a.astype(np.float64)
    # the value itself, or the shortest decimal that prints it in its type (0.1 is the f16
    # 0.0999755859375; 2049 is not the f16 2048); f32 and wider: 7 significant digits do
    same = (af == ef) | (np.isnan(af) & np.isnan(ef))
    same |= af == np.array([_shortest(x) for x in e.reshape(-1)], np.float64).reshape(e.shape)
    if e.dtype.itemsize >= 4:
        same |= np.isclose(ef, af, rtol=1e-6, atol=0)
    return same


def _shortest(x):
    try:
        return float(np.format_float_positional(x, unique=True)) if np.isfinite(x) else float(x)
    except (TypeError, ValueError):
        return float(x)


class ReadExercise(Exercise):
    """Which operand element does a result element read (or an update write)?  The op's index
    map is the judge; its ``Access.detail`` is the explanation."""

    kind = "read"

    def setup(self, rng):
        imap = self.call.index_map()
        self.index = self.generator.pick_index(rng, self.call, imap, self.level)
        self.access = imap[self.index]
        self.mode = self.generator.read_mode

    def question(self):
        return self.generator.read_question(self.call, self.index)

    def kind_hint(self):
        return "Follow the spec's formula for this one index, step by step."

    def step_hint(self):
        steps = [k for k in self.access.detail if k not in self.generator.detail_skip]
        return ("Work out, in this order: " + ", ".join(steps) + ".") if steps else ""

    def expected_reads(self):
        a = self.access
        if self.mode == "scatter":
            return "skipped" if a.skipped else tuple(a.writes[0][1])
        if self.mode == "copy":
            if not a.reads:
                return "padding"
            k, idx = a.reads[0]
            return (k, tuple(idx))
        if self.mode == "pairs":
            return frozenset((tuple(a.reads[i][1]), tuple(a.reads[i + 1][1])) for i in range(0, len(a.reads), 2))
        return frozenset(tuple(idx) for k, idx in a.reads if k == 0)   # "set"

    def answer_value(self):
        e = self.expected_reads()
        if self.mode == "copy" and e != "padding":
            k, idx = e
            return (self.call.operands[k][0], idx) if self.generator.read_names_operand else idx
        if isinstance(e, frozenset):
            return sorted(e)
        return e

    def reasoning(self):
        return [line for line in self.generator.access_steps(self.call, self.access) if line]

    def judge(self, answer, reveal):
        got = self._normalize(answer)
        want = self.expected_reads()
        why = "\n".join(self.reasoning())
        if got == want:
            return Feedback(True, why, self.answer_value())
        if self.mode == "copy" and want != "padding" and got != "padding" and got[1] == want[1] \
                and not self.generator.read_names_operand:
            return Feedback(True, why, self.answer_value())
        if not reveal:
            return Feedback(False, self._hidden_difference(got, want) + (
                "\n" + self.generator.read_formula if self.generator.read_formula else ""))
        return Feedback(False, self._difference(got, want) + "\n" + why, self.answer_value())

    def _hidden_difference(self, got, want):
        """What is wrong, without the right answer."""
        where = f"updates{index_text(self.index)}" if self.mode == "scatter" else f"result{index_text(self.index)}"
        if isinstance(want, frozenset):
            return (f"Not the elements combined into {where}: {len(want - got)} missing, "
                    f"{len(got - want)} that do not belong.")
        if got in ("padding", "skipped"):
            return f"{where} is not {got}."
        if self.mode == "scatter":
            return f"{where} is not combined into result{index_text(got)}."
        return f"{where} does not copy {self.call.operands[got[0]][0]}{index_text(got[1])}."

    def _difference(self, got, want):
        name = self.call.operands[0][0]
        if self.mode == "scatter":
            return f"updates{index_text(self.index)} " + (
                "is skipped: its window does not fit in the operand" if want == "skipped"
                else f"is combined into result{index_text(want)}, not " +
                ("skipped" if got == "skipped" else f"result{index_text(got)}")) + "."
        if self.mode == "copy":
            if want == "padding":
                return f"result{index_text(self.index)} is padding; it reads no operand element."
            what = f"{self.call.operands[want[0]][0]}{index_text(want[1])}"
            return f"result{index_text(self.index)} copies {what}" + (
                ", not padding." if got == "padding" else
                f", not {self.call.operands[got[0]][0]}{index_text(got[1])}.")
        if self.mode == "pairs":
            missing, extra = want - got, got - want
            return (f"result{index_text(self.index)} sums {len(want)} products; "
                    f"{len(missing)} of them are missing from your answer and {len(extra)} of yours are not "
                    "among them.")
        missing, extra = sorted(want - got), sorted(got - want)
        parts = []
        if missing:
            parts.append("missing " + ", ".join(f"{name}{index_text(i)}" for i in missing[:4])
                         + (" ..." if len(missing) > 4 else ""))
        if extra:
            parts.append("not read: " + ", ".join(f"{name}{index_text(i)}" for i in extra[:4])
                         + (" ..." if len(extra) > 4 else ""))
        return f"result{index_text(self.index)} combines {len(want)} elements of {name}; " + "; ".join(parts) + "."

    def _normalize(self, answer):
        if isinstance(answer, str):
            word = answer.strip().lower()
            if word in ("padding", "padding_value", "skipped", "skip", "none", "nothing", "init", "init_value"):
                answer = {"skip": "skipped"}.get(word, word)
            else:
                answer = parse_literal(answer)
        if self.mode == "scatter":
            if isinstance(answer, str) and answer in ("skipped", "none", "nothing"):
                return "skipped"
            idx = as_index(answer)
            if idx is None:
                raise ValueError("answer an index such as (1, 2), or \"skipped\"")
            return idx
        if self.mode == "copy":
            if isinstance(answer, str) and answer in ("padding", "padding_value", "none", "nothing"):
                return "padding"
            named = isinstance(answer, (tuple, list)) and len(answer) == 2 and as_index(answer[1]) is not None \
                and (isinstance(answer[0], str) or (isinstance(answer[0], (int, np.integer))
                                                    and self.generator.read_names_operand))
            if named:
                k = self._operand_number(answer[0])
                return (k, as_index(answer[1]))
            idx = as_index(answer)
            if idx is None:
                raise ValueError("answer an index such as (1, 2)" + (
                    ", with the operand: (\"update\", (0, 1))" if self.generator.read_names_operand else ""))
            return (0, idx)
        items = answer
        if isinstance(items, str):
            items = []
        if not isinstance(items, (list, tuple, set, frozenset)):
            raise ValueError("answer a list of indices, e.g. [(0, 1), (0, 2)]")
        if self.mode == "pairs":
            out = set()
            for p in items:
                if not (isinstance(p, (list, tuple)) and len(p) == 2):
                    raise ValueError("answer a list of pairs ((lhs index), (rhs index))")
                li, ri = as_index(p[0]), as_index(p[1])
                if li is None or ri is None:
                    raise ValueError(f"cannot read the pair {p!r}")
                out.add((li, ri))
            return frozenset(out)
        out = set()
        for i in items:
            idx = as_index(i)
            if idx is None:
                raise ValueError(f"cannot read the index {i!r}")
            out.add(idx)
        return frozenset(out)

    def _operand_number(self, name):
        if isinstance(name, (int, np.integer)):
            return int(name)
        for k, (n, _) in enumerate(self.call.operands):
            if name in (n, self.call.args.get(n)):
                return k
        raise ValueError(f"{name!r} is not an operand of this call ({', '.join(n for n, _ in self.call.operands)})")


class AttributeExercise(Exercise):
    """Fill in the attribute: find the value(s) that produce the target; the op is run with
    the student's attribute (its shape rule first) and the result compared with the target."""

    kind = "attribute"

    def setup(self, rng):
        self.hidden = tuple(self.generator.hidden_attrs(self.call, self.level))
        self.target = self.call.run()

    def body(self):
        head = "let target = "
        target = f"{head}{spec_literal(self.target, len(head))};  // {type_text(self.target)}"
        return self.call.declarations() + ["", self.call.call_text(self.hidden, prefix="result = "), "", target]

    def question(self):
        names = " and ".join(self.hidden)
        forms = ", ".join(f"\"{h}\": {_form(h, self.call.attrs[h])}" for h in self.hidden)
        example = f"; answer a dict {{{forms}}} or a tuple in this order" if len(self.hidden) > 1 else \
            f"; answer its value: {_form(self.hidden[0], self.call.attrs[self.hidden[0]])}"
        verb = "makes" if len(self.hidden) == 1 else "make"
        return f"Which {names} {verb} the result equal to target?\nFill in the ?{example}."

    def kind_hint(self):
        return "Compare the target with the operand: its size and which elements it keeps tell the attribute."

    def step_hint(self):
        operands = ", ".join(f"{n} is {type_text(v)}" for n, v in self.call.operands)
        return f"The target is {type_text(self.target)}; {operands}."

    def answer_value(self):
        values = [self.call.attrs[h] for h in self.hidden]
        return values[0] if len(values) == 1 else dict(zip(self.hidden, values))

    def reasoning(self):
        return self.generator.attribute_steps(self.call, self.hidden)

    def code(self):
        return self.call.code(target=self.target)

    def _ours(self):
        """The attribute values the exercise was made with (a fix exercise: the intended ones)."""
        return {h: self.call.attrs[h] for h in self.hidden}

    def _parse_text(self, text):
        """An answer written as text: a literal, or a shape ("s32[2,3]") where the attribute is one."""
        if len(self.hidden) == 1 and self.hidden[0] in self.generator.shape_attrs:
            try:
                return Shape.parse(text.strip())
            except Exception as e:  # noqa: BLE001 - the parser's message says what it could not read
                raise ValueError(f"{text.strip()!r} is not a shape such as s32[2,3] ({e})") from None
        return parse_literal(text)

    def judge(self, answer, reveal):
        if isinstance(answer, str):
            answer = self._parse_text(answer)
        if len(self.hidden) == 1:
            if isinstance(answer, dict):
                answer = answer.get(self.hidden[0])
            values = {self.hidden[0]: answer}
        elif isinstance(answer, dict):
            missing = [h for h in self.hidden if h not in answer]
            if missing:
                raise ValueError(f"the answer has no {', '.join(missing)}")
            values = {h: answer[h] for h in self.hidden}
        elif isinstance(answer, (tuple, list)) and len(answer) == len(self.hidden):
            values = dict(zip(self.hidden, answer))
        else:
            raise ValueError(f"give {', '.join(self.hidden)} as a dict or a tuple in that order")
        values = {k: self.generator.normalize_attr(k, v) for k, v in values.items()}
        attrs = dict(self.call.attrs, **values)
        shown = ", ".join(f"{k}={spec_attr(v, k)}" for k, v in values.items())
        why = "\n".join(self.reasoning())
        try:
            shape = self.call.shape(attrs)
        except ShapeError as e:
            return Feedback(False, f"With {shown} the call is illegal: {e}" + ("\n" + why if reveal else self._hint_line()),
                            self.answer_value() if reveal else None)
        if shape != Shape.of(self.target):  # before running: a wrong attribute may ask for a huge result
            return Feedback(False, f"With {shown} the result is {shape}, but the target is {type_text(self.target)}."
                            + ("\n" + why if reveal else self._hint_line()), self.answer_value() if reveal else None)
        too_big = _beyond_sizes(values, [v for _, v in self.call.operands] + [self.target])
        if too_big is not None:  # the result is small, but padding or dilating by this much is not
            return Feedback(False, f"With {shown} the result has the target's shape, but {too_big} is far beyond "
                            "every size in this exercise: no attribute that gives the target needs it. "
                            + self.kind_hint())
        try:
            result = self.call.run(attrs)
        except Exception as e:  # noqa: BLE001 - report whatever the reference says
            return Feedback(False, f"With {shown} the op fails: {e}", self.answer_value() if reveal else None)
        target = self.target
        if Shape.of(result) != Shape.of(target):
            return Feedback(False, f"With {shown} the result is {shape}, but the target is {type_text(target)}."
                            + ("\n" + why if reveal else self._hint_line()), self.answer_value() if reveal else None)
        same = _same_values(target, np.asarray(result)) if not isinstance(target, tuple) else np.array(True)
        if not np.all(same):
            first = tuple(int(i) for i in np.argwhere(~same)[0])
            return Feedback(False, f"With {shown} the result has the right shape ({shape}) but result"
                            f"{index_text(first)} = {scalar_text(result[first])}, while target{index_text(first)} = "
                            f"{scalar_text(target[first])}." + ("\n" + why if reveal else self._hint_line()),
                            self.answer_value() if reveal else None)
        ours = self._ours()
        extra = "" if all(spec_attr(values[h], h) == spec_attr(ours[h], h) for h in self.hidden) else \
            f"\n(The exercise used {', '.join(f'{k}={spec_attr(v, k)}' for k, v in ours.items())}; yours works too.)"
        return Feedback(True, f"With {shown} the result is the target." + extra + "\n" + why, self.answer_value())


KINDS = {cls.kind: cls for cls in (ShapeExercise, LegalExercise, ValuesExercise, ReadExercise, AttributeExercise)}
_KIND_NUMBER = {kind: i + 1 for i, kind in enumerate(KINDS)}


# =========================================================================================
# Generators
# =========================================================================================

class Generator:
    """Makes exercises about one op.  Subclasses write ``problem`` (a legal call for a level),
    ``mutations`` (ways to break a rule) and the explanations; the answers come from the op."""

    opcode = None
    kinds = ("shape", "values", "read", "attribute", "legal")
    #: the op's semantics in a sentence (a hint)
    rule = ""
    #: the spec's formula (a hint; shown when a wrong answer is checked without revealing)
    formula = ""
    #: the index map's formula, for read exercises
    read_formula = ""
    #: read exercises: "copy" (one element), "set" (elements combined), "pairs" (lhs, rhs
    #: products), "scatter" (where an update element goes)
    read_mode = "copy"
    #: read answers must name the operand ("update", (0, 1)) (ops reading several operands)
    read_names_operand = False
    #: the attribute(s) an attribute exercise hides
    hidden = ()
    #: shape exercises ask for this operand's shape instead of the result's
    shape_operand = None
    type_rule = "the result has the operand's element type"
    #: keys of Access.detail not worth showing
    detail_skip = ()
    #: kind -> title, where the op asks something else than KIND_TITLES says
    titles = {}
    #: kind -> Exercise subclass, where the op needs its own (the collectives' values and fix)
    kind_classes = {}
    #: "implement" exercises: the positional parameters of the student's function, where the
    #: operands' names vary with the level ("*operands": any number of arrays)
    implement_operands = None
    #: "implement" exercises: a line the prompt adds about what the student's function returns
    implement_note = ""
    #: "implement" exercises: the student's function's name where the op's is no Python name (While's)
    implement_name = None
    #: "implement" exercises: the first hint, where looping over the result's indices is not the way
    implement_hint = ""
    #: "implement" exercises: the computations take the loop state (While's), not scalars
    implement_state = False
    #: attributes whose value is a Shape that a student answers as text ("s32[2,3]"): Bitcast's
    shape_attrs = ()

    def __init__(self):
        self._crc = zlib.crc32(self.opcode.encode())

    # -- what subclasses write --------------------------------------------------------------
    def problem(self, rng, level, kind):
        raise NotImplementedError

    def mutations(self, call):
        """``[(argument, fn(call, rng) -> broken call or None), ...]``"""
        return []

    def hidden_attrs(self, call, level):
        return self.hidden

    def normalize_attr(self, kw, value):
        """A student's attribute value in the form the op's attrs take."""
        if kw in self.shape_attrs and isinstance(value, str):
            return Shape.parse(value.strip())
        if isinstance(value, np.ndarray):
            value = value.tolist()
        if isinstance(value, list):
            return tuple(tuple(v) if isinstance(v, list) else v for v in value)
        return value

    def shape_steps(self, call, shape):
        return [f"The result is {shape}."]

    def operand_shape_steps(self, call, name):
        return [f"{name} is {Shape.of(call.value(name))}."]

    def access_steps(self, call, access):
        lines = [self.read_formula] if self.read_formula else []
        for k, v in access.detail.items():
            if k not in self.detail_skip:
                lines.append(f"{k} = {plain(v)}")
        if access.clamped:
            lines.append("The start index was clamped so that the whole slice is in bounds.")
        if access.skipped:
            lines.append("XLA skips this update: its window is (partly) out of bounds.")
        lines.append(self._reads_text(call, access))
        return lines

    def _reads_text(self, call, access):
        if access.writes or access.skipped:
            return "" if access.skipped else f"It is combined into result{index_text(access.writes[0][1])}."
        if not access.reads:
            return f"result{index_text(access.index)} reads no operand element ({access.source})."
        if self.read_mode == "copy":
            k, idx = access.reads[0]
            name, value = call.operands[k]
            element = scalar_text(np.asarray(value)[tuple(idx)])
            return f"result{index_text(access.index)} = {name}{index_text(idx)} = {element}"
        return ""

    def attribute_steps(self, call, hidden):
        lines = [f"{h} = {spec_attr(call.attrs[h], h)} gives the target." for h in hidden]
        return lines + ([self.formula] if self.formula else [])

    def pick_index(self, rng, call, imap, level):
        """A result index to ask about; from level 2 on, preferably a clamped, padded or
        skipped one."""
        accesses = list(imap)
        special = [a.index for a in accesses if a.clamped or a.skipped or (not a.reads and not a.writes)
                   or a.source == "padding"]
        if special and level >= 2 and rng.random() < 0.6:
            return special[rng.integers(len(special))]
        return accesses[rng.integers(len(accesses))].index

    def read_question(self, call, index):
        name = call.operands[0][0]
        if self.read_mode == "set":
            example = "[1, 2]" if np.ndim(call.values[0]) == 1 else "[(0, 1), (0, 2)]"
            return (f"Which elements of {name} are combined into result{index_text(index)}?\n"
                    f"Answer a list of indices, e.g. {example} ([] if none).")
        if self.read_mode == "pairs":
            lhs, rhs = call.operands[0][0], call.operands[1][0]
            return (f"Which products {lhs}[...] * {rhs}[...] are summed into result{index_text(index)}?\n"
                    f"Answer a list of index pairs, e.g. [((0, 1), (1, 0)), ...].")
        return (f"Which element of {name} does result{index_text(index)} copy?\n"
                "Answer with its index, e.g. (2, 0).")

    def values_steps(self, call, result, k=None):
        """The reasoning for a values exercise: a couple of elements worked out."""
        r = result[k] if k is not None else result
        if isinstance(r, tuple):
            r = r[0]
        if np.ndim(r) == 0:
            return self.value_steps(call, (), result, k)
        n = int(np.prod(np.shape(r)))
        picks = sorted({0, n // 2, n - 1}) if n else []
        lines = [self.formula] if self.formula else []
        for p in picks:
            idx = tuple(int(i) for i in np.unravel_index(p, np.shape(r)))
            lines += [s for s in self.value_steps(call, idx, result, k) if s != self.formula]
        lines.append(f"result = {spec_literal(result, 9)}")
        return lines

    def value_steps(self, call, index, result, k=None):
        """Why ``result[index]`` (of tuple element k) has its value; by the index map here."""
        imap = call.index_map()
        value = (result if k is None else result[k])[index]
        if imap.domain != "result":
            return self._scatter_value_steps(call, imap, index, value)
        access = imap[index]
        if not access.reads and self.read_mode == "pairs":
            return [f"result{index_text(index)} = {scalar_text(value)}: the window covers only padding "
                    "(or holes of the dilation), so no products are summed"]
        if not access.reads and self.read_mode == "set":
            return [f"result{index_text(index)} = {scalar_text(value)}: no operand element is combined, only the "
                    "init value"]
        if not access.reads:
            pad = call.values[1] if self.opcode == "pad" else None
            return [f"result{index_text(index)} = {scalar_text(value)}: it is padding"
                    + (f" (padding_value = {scalar_text(pad)})" if pad is not None else "")] + \
                [f"{k2} = {plain(v)}" for k2, v in access.detail.items() if k2 == "padding"]
        if self.read_mode == "copy":
            kk, idx = access.reads[0]
            name = call.operands[kk][0]
            steps = [line for line in self.access_steps(call, access)[:-1]
                     if line and line not in (self.formula, self.read_formula)]
            return [f"result{index_text(index)} = {name}{index_text(idx)} = {scalar_text(value)}"] + \
                [f"  {line}" for line in steps]
        if self.read_mode == "pairs":
            lhs, rhs = call.values[0], call.values[1]
            terms = [f"{scalar_text(lhs[access.reads[i][1]])}*{scalar_text(rhs[access.reads[i + 1][1]])}"
                     for i in range(0, len(access.reads), 2)]
            return [f"result{index_text(index)} = sum of {len(terms)} products = "
                    + (" + ".join(terms) if terms else "0") + f" = {scalar_text(value)}"]
        operand, init = call.values[0], call.values[len(call.values) // 2]
        comp = next((v for v in call.attrs.values() if isinstance(v, Computation)), None)
        elems = [scalar_text(operand[tuple(idx)]) for kk, idx in access.reads if kk == 0]
        name = comp.name if comp else "combine"
        return [f"result{index_text(index)} = {name} of init {scalar_text(init)} and "
                f"{{{', '.join(elems)}}} = {scalar_text(value)}"]

    def _scatter_value_steps(self, call, imap, index, value):
        operand = call.values[0]
        updates = call.values[-1]
        hits = sorted((a.detail.get("schedule_position", 0), a.index) for a in imap
                      if a.writes and tuple(a.writes[0][1]) == tuple(index))
        comp = call.attrs.get("update_computation")
        name = comp.name if isinstance(comp, Computation) else "update_computation"
        if not hits:
            return [f"result{index_text(index)} = operand{index_text(index)} = {scalar_text(value)}: "
                    "no update element lands here"]
        parts = ", ".join(f"updates{index_text(u)} = {scalar_text(updates[u])}" for _, u in hits)
        return [f"result{index_text(index)}: start from operand{index_text(index)} = "
                f"{scalar_text(operand[tuple(index)])}, then {name} with {parts} (in XLA's order) "
                f"-> {scalar_text(value)}"]

    # -- making exercises ------------------------------------------------------------------
    def __call__(self, seed=0, level=1, kind=None, teacher=False):
        level = int(level)
        if level not in LEVELS:
            raise ValueError(f"level={level}: levels are 1 (small, rank 1-2), 2 and 3 (batching, "
                             "negative padding, dilations, out-of-bounds starts)")
        seed = int(seed)
        if kind is None:
            kind = self.kinds[np.random.default_rng([seed, level, self._crc, 99]).integers(len(self.kinds))]
        if kind not in self.kinds:
            raise ValueError(f"{self.opcode} has no {kind!r} exercises; kinds: {', '.join(self.kinds)}")
        # a kind may have problems of its own (indexing stories, replicated operands)
        problem = getattr(self, kind + "_problem", self.problem)
        call = problem(np.random.default_rng([seed, level, self._crc]), level, kind)
        call.shape()  # a generated problem is legal (mutations come later)
        rng = np.random.default_rng([seed, level, self._crc, _KIND_NUMBER[kind]])
        cls = self.kind_classes.get(kind, KINDS[kind])
        return cls(self, call, seed=seed, level=level, rng=rng, teacher=teacher)

    def __repr__(self):
        return f"<exercise generator {self.opcode}: {', '.join(self.kinds)}>"


#: opcode -> generator
GENERATORS = {}


def register(generator):
    """Add a generator to the bank and to the status table's "exercise" column."""
    GENERATORS[generator.opcode] = generator
    registry.register_layer("exercise", generator.opcode, generator)
    return generator


# =========================================================================================
# Small helpers for the generators
# =========================================================================================

def distinct(rng, shape, level, dtype=np.int32, low=0):
    """Operand values: 0, 1, 2, ... at level 1 (the value tells the index), distinct
    shuffled numbers from level 2 on."""
    n = int(np.prod(shape, dtype=np.int64))
    if level == 1:
        values = np.arange(low, low + n)
    else:
        values = rng.choice(np.arange(1, max(100, 2 * n)), size=n, replace=False)
    return values.reshape(shape).astype(dtype)


def ints(rng, low, high):
    """An integer in [low, high] (both included)."""
    return int(rng.integers(low, high + 1))


def computation(name, kind, n=2):
    """A reduction body: "add", "max", "min", "mul" (or "replace", Scatter's overwrite)."""
    from .. import ops
    fns = {"add": (ops.Add, "a + b", "xe.Add(a, b)", lambda a, b: a + b),
           "max": (ops.Max, "max(a, b)", "xe.Max(a, b)", np.maximum),
           "min": (ops.Min, "min(a, b)", "xe.Min(a, b)", np.minimum),
           "mul": (ops.Mul, "a * b", "xe.Mul(a, b)", lambda a, b: a * b)}
    if kind == "replace":
        return Computation(name, lambda a, b: b, f"{name}(a, b) = b", "lambda a, b: b", numpy=lambda a, b: b)
    fn, text, code, numpy_fn = fns[kind]
    return Computation(name, lambda a, b: fn(a, b), f"{name}(a, b) = {text}", f"lambda a, b: {code}",
                       numpy=numpy_fn)
