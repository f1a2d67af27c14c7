""""implement" exercises for ops with computations (Map, Reduce, ReduceWindow, Scatter, Sort,
SelectAndScatter): a student's NumPy function, written from the prompt alone, gets the
computations as Python functions of NumPy scalars; a right one passes on the hidden
configurations, a wrong one is shown the configuration it fails on and the rule."""
import functools

import numpy as np
import pytest

from xla_explorer import exercises as E


# -- what a student writes: loops over np.ndindex, the computations called on scalars ------------

def map_(*operands, dimensions, computation):
    out = np.empty(operands[0].shape, dtype=np.int64)
    for i in np.ndindex(*operands[0].shape):
        out[i] = computation(*(o[i] for o in operands))
    return out


def reduce_(operand, init_value, *, dimensions, computation):
    keep = [d for d in range(operand.ndim) if d not in dimensions]
    out = np.full([operand.shape[d] for d in keep], init_value, dtype=operand.dtype)
    for i in np.ndindex(*operand.shape):
        j = tuple(i[d] for d in keep)
        out[j] = computation(out[j], operand[i])
    return out


def reduce_window(operand, init_value, *, window_dimensions, window_strides, padding, base_dilations,
                  window_dilations, computation):
    dilated = [(n - 1) * b + 1 for n, b in zip(operand.shape, base_dilations)]
    base = np.full([s + lo + hi for s, (lo, hi) in zip(dilated, padding)], init_value, dtype=operand.dtype)
    base[tuple(slice(lo, lo + s, b) for (lo, _), s, b in zip(padding, dilated, base_dilations))] = operand
    span = [(w - 1) * d + 1 for w, d in zip(window_dimensions, window_dilations)]
    out = np.empty([(n - s) // st + 1 for n, s, st in zip(base.shape, span, window_strides)], operand.dtype)
    for i in np.ndindex(*out.shape):
        acc = init_value
        for w in np.ndindex(*window_dimensions):
            acc = computation(acc, base[tuple(a * st + b * d for a, st, b, d in
                                              zip(i, window_strides, w, window_dilations))])
        out[i] = acc
    return out


def sort(*operands, dimension, is_stable, comparator):
    out = [np.array(o) for o in operands]
    others = [s for d, s in enumerate(operands[0].shape) if d != dimension]
    for rest in np.ndindex(*others):
        def at(k):
            return rest[:dimension] + (k,) + rest[dimension:]

        def cmp(a, b):
            if comparator(*[x for o in operands for x in (o[at(a)], o[at(b)])]):
                return -1
            return 1 if comparator(*[x for o in operands for x in (o[at(b)], o[at(a)])]) else 0
        order = sorted(range(operands[0].shape[dimension]), key=functools.cmp_to_key(cmp))  # stable
        for o, src in zip(out, operands):
            for k, j in enumerate(order):
                o[at(k)] = src[at(j)]
    return tuple(out) if len(out) > 1 else out[0]


def scatter(operand, scatter_indices, updates, *, update_window_dims, inserted_window_dims,
            scatter_dims_to_operand_dims, input_batching_dims, scatter_indices_batching_dims,
            index_vector_dim, update_computation, skip_whole_windows=True):
    out = np.array(operand)
    scatter_dims = [d for d in range(updates.ndim) if d not in update_window_dims]
    window_dims = [d for d in range(operand.ndim) if d not in inserted_window_dims + input_batching_dims]
    index_batch = [d for d in range(scatter_indices.ndim) if d != index_vector_dim]
    size = [1] * operand.ndim
    for k, d in enumerate(window_dims):
        size[d] = updates.shape[update_window_dims[k]]
    for u in np.ndindex(*updates.shape):
        at = [u[d] for d in scatter_dims]
        if index_vector_dim < scatter_indices.ndim:
            at.insert(index_vector_dim, slice(None))
        start = [0] * operand.ndim
        for k, d in zip(np.atleast_1d(scatter_indices[tuple(at)]), scatter_dims_to_operand_dims):
            start[d] = int(k)
        for ib, sb in zip(input_batching_dims, scatter_indices_batching_dims):
            start[ib] = u[scatter_dims[index_batch.index(sb)]]
        offset = [0] * operand.ndim
        for k, d in enumerate(window_dims):
            offset[d] = u[update_window_dims[k]]
        target = tuple(s + o for s, o in zip(start, offset))
        fits = (all(0 <= s and s + w <= n for s, w, n in zip(start, size, operand.shape)) if skip_whole_windows
                else all(0 <= t < n for t, n in zip(target, operand.shape)))
        if fits:
            out[target] = update_computation(out[target], updates[u])
    return out


def select_and_scatter(operand, source, init_value, *, window_dimensions, window_strides, padding, select,
                       scatter):
    out = np.full(operand.shape, init_value, dtype=operand.dtype)
    for s in np.ndindex(*source.shape):
        best = None
        for w in np.ndindex(*window_dimensions):
            p = tuple(a * st + b - lo for a, st, b, (lo, _) in zip(s, window_strides, w, padding))
            if all(0 <= q < n for q, n in zip(p, operand.shape)) and (best is None or not select(operand[best],
                                                                                                   operand[p])):
                best = p
        out[best] = scatter(out[best], source[s])
    return out


STUDENTS = {"map": map_, "reduce": reduce_, "reduce-window": reduce_window, "sort": sort, "scatter": scatter,
            "select-and-scatter": select_and_scatter}


@pytest.mark.parametrize("op", sorted(STUDENTS))
def test_a_students_numpy_function_passes_on_hidden_configurations(op):
    assert "implement" in E.available()[op]
    ex = E.make(op, seed=0, level=2, kind="implement")
    prompt = ex.prompt
    assert "def " + ex.function_name + "(" in prompt and "Python function of NumPy scalars" in prompt
    assert "XLA's rule:" in prompt
    fb = ex.check(STUDENTS[op])
    assert fb.correct, fb.message
    assert fb.expected is None and "configurations" in fb.message


def test_a_wrong_function_is_shown_the_configuration_and_the_rule_never_the_answer():
    # the spec's element-wise bounds check instead of XLA's whole-window skip: found on some configuration
    ex = E.make("scatter", seed=0, level=1, kind="implement")
    fb = ex.check(functools.partial(scatter, skip_whole_windows=False))
    assert not fb.correct and fb.expected is None
    assert "Scatter(" in fb.message and "yours" in fb.message and "skips a window" in fb.message

    # a sort that ignores the comparator: the greater-than example already shows it
    ex = E.make("sort", seed=0, level=2, kind="implement")
    fb = ex.check(lambda *ops, dimension, is_stable, comparator: np.sort(ops[0], axis=dimension))
    assert not fb.correct and "result[0, 0] is" in fb.message and "comparator" in fb.message

    # one array where two operands sort together: told that a tuple is expected
    ex = E.make("sort", seed=0, level=3, kind="implement")
    assert "tuple of arrays" in ex.prompt
    fb = ex.check(lambda *ops, **kw: sort(*ops, **kw)[0])
    assert not fb.correct and "tuple of 2 arrays" in fb.message

    # a reduce that starts from 0 instead of init_value (inf for min): wrong, and the teacher sees the answer
    ex = E.make("reduce", seed=0, level=2, kind="implement", teacher=True)
    fb = ex.check(lambda operand, init_value, **kw: reduce_(operand, np.zeros_like(init_value), **kw))
    assert not fb.correct and "init_value" in fb.message and callable(fb.expected)


def test_the_computation_a_student_gets_is_a_plain_function_of_scalars():
    ex = E.make("map", seed=0, level=3, kind="implement")
    seen = []

    def spy(*operands, dimensions, computation):
        seen.append(computation(*(o.reshape(-1)[0] for o in operands)))
        return map_(*operands, dimensions=dimensions, computation=computation)
    assert ex.check(spy).correct
    assert all(np.ndim(v) == 0 and isinstance(v, np.generic) for v in seen)
    assert "f(" in repr(ex.call.attrs["computation"].scalar_function())


def while_loop(init, *, condition, body):
    state = init
    while condition(state):
        state = body(state)
    return state


def test_while_is_implemented_with_functions_of_the_loop_state():
    for level in (1, 3):
        ex = E.make("while", seed=0, level=level, kind="implement")
        assert "def while_loop(init, *, condition, body):" in ex.prompt and "condition(init) returns" in ex.prompt
        assert ex.check(while_loop).correct
        fb = ex.check(lambda init, *, condition, body: body(init))  # one iteration, whatever the condition
        assert not fb.correct and "While(" in fb.message and "yours" in fb.message


def test_the_widget_takes_the_name_of_a_function_defined_in_the_notebook(monkeypatch):
    pytest.importorskip("ipywidgets")
    import __main__
    ex = E.make("reduce", seed=0, level=1, kind="implement")
    ui = ex.widget()
    assert "name of your function" in ui.answer_box.placeholder
    ui.answer_box.value = "my_reduce"
    ui.buttons[0].click()
    assert "No function named" in ui.output.value and "def my_reduce(" in ui.output.value
    monkeypatch.setattr(__main__, "my_reduce", reduce_, raising=False)  # as if defined in a cell
    ui.buttons[0].click()
    assert "Correct" in ui.output.value
    ui.answer_box.value = "reduce_(  "  # not a name: told, never raised
    ui.buttons[0].click()
    assert "No function named" in ui.output.value


def test_the_students_function_never_hides_a_python_builtin():
    names = {op: E.make(op, seed=0, level=1, kind="implement").function_name
             for op, kinds in E.available().items() if "implement" in kinds}
    assert names["map"] == "map_" and names["slice"] == "slice_" and names["while"] == "while_loop"
    assert names["reduce"] == "reduce" and names["dynamic-slice"] == "dynamic_slice"
    import builtins
    import keyword
    assert not [n for n in names.values() if n in vars(builtins) or keyword.iskeyword(n) or not n.isidentifier()]
