"""The builder in JupyterLab: an operand typed and Enter adds it; an error beside its field;
Run on Numba shows its progress (the first Numba run of the kernel loads its kernels)."""
import nbformat

CODE = '''from xla_explorer.widgets import BuilderWidget
bw = BuilderWidget("demo")
bw.add_parameter("f32[3,4]", "x")
bw.op_name = "Transpose"
bw'''


def test_builder_enter_adds_an_operand_and_errors_sit_beside_their_field(notebook):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(CODE)])
    notebook.open(nb, "builder.ipynb")
    notebook.run_all()
    bw = notebook.page.locator(".xe-builder")
    entry = bw.locator(".xe-operand-entry input")
    entry.fill("x")
    entry.press("Enter")  # the reported bug: Enter did not add the operand
    bw.locator(".xe-operands").filter(has_text="x").wait_for()
    assert notebook.execute("print(bw.operands)").strip() == "['x']"
    assert entry.input_value() == ""

    notebook.set_control("permutation", "[0, 0]", within=bw)
    beside = bw.locator(".xe-row.xe-arg-permutation .xe-error")
    beside.filter(has_text="permutation").wait_for()
    others = bw.locator(".xe-error:not(.xe-error-permutation)")
    assert all(not t.strip() for t in others.all_inner_texts())  # only beside the field at fault
    notebook.screenshot("builder_error_beside_field", bw)
    assert notebook.illegible(bw) == []

    notebook.set_control("permutation", "[1, 0]", within=bw)
    bw.locator(".xe-result").filter(has_text="f32[4,3]").wait_for()
    assert not beside.inner_text().strip()
    bw.locator("button:text-is(\"Add\")").first.click()
    bw.locator(".xe-hlo").filter(has_text="transpose(x)").wait_for()
    assert "``" not in bw.locator(".xe-signature").inner_text()
    bw.locator(".lm-TabBar-tab", has_text="Python").click()
    code = bw.locator("pre", has_text="xe.Transpose(x, permutation=[1, 0])")
    code.wait_for()
    notebook.screenshot("builder_added", bw)
    assert notebook.illegible(bw) == []

    # Run on the Numba backend: the first Numba run of this kernel shows a bar in the builder
    notebook.set_control("backend", "numba", within=bw)
    bw.locator("button:text-is(\"Run\")").first.click()
    bw.locator("pre", has_text="(numba,").filter(has_text="result: f32[4,3]").wait_for(timeout=120_000)
    bar = bw.locator(".xe-progress")
    assert "cpu: loading Numba and its kernels" in bar.first.inner_text() and "done in" in bar.first.inner_text()
    notebook.screenshot("builder_run_numba", bw)
    assert notebook.illegible(bw) == []

