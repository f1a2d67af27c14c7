"""The real-browser harness: one JupyterLab and one headless Chromium per test session.

JupyterLab runs on 127.0.0.1 with a free port and a random token, in a temporary root
directory, with the kernel of this Python (the venv's).  Playwright drives Debian's
``/usr/bin/chromium`` (``XE_CHROMIUM`` overrides the path); it never downloads a browser.
Where no Chromium (or no Playwright / JupyterLab) is installed, the tests skip and say why.

A test asks for ``notebook`` (a fresh tab of the session's JupyterLab), then::

    notebook.open("notebooks/playground.ipynb")          # copied, outputs stripped
    notebook.run_all()                                   # every cell; a raising cell fails
    notebook.set_control("comparison_direction", "LT")   # a widget found by its description
    ctl = notebook.control("slice_sizes", within=".xe-playground")
    notebook.screenshot("playground_error", ctl)         # tests/e2e/artifacts/*.png
    notebook.execute("print(pg.shape_text)")             # read a traitlet in the kernel

See tests/e2e/README.md.
"""
import json
import os
import pathlib
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
ARTIFACTS = pathlib.Path(__file__).resolve().parent / "artifacts"
CHROMIUM = os.environ.get("XE_CHROMIUM", "/usr/bin/chromium")
# flags that work in a container as root, without a GPU, without network side trips
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]
#: how long one notebook may take to run all its cells in the browser before the test
#: calls it a hang: a passing run returns as soon as it is done, and a fresh clone (cold
#: kernel caches) on 2 loaded cores ran notebook 03 past 240 s
RUN_TIMEOUT_S = float(os.environ.get("XE_E2E_RUN_TIMEOUT", "900"))

# JupyterLab user settings for the session: no news pop-up, no update check, every cell in
# the DOM (JupyterLab 4 windows long notebooks, and a cell that is not drawn cannot be found)
_LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                       "checkForUpdates": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


def _why_not():
    """Why the browser tests cannot run here (None when they can)."""
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        return (f"no Chromium at {CHROMIUM}: install Debian's package (apt-get install chromium; "
                "scripts/test.sh does it when run as root) or set XE_CHROMIUM")
    for module, extra in (("playwright", "playwright"), ("jupyterlab", "jupyterlab"), ("nbformat", "nbformat")):
        try:
            __import__(module)
        except ImportError:
            return f"{module} is not installed (pip install -e '.[test]' installs {extra})"
    return None


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    """A running JupyterLab: ``url``, ``token``, ``root`` (its temporary root directory)."""

    def __init__(self, url, token, root, process, log):
        self.url, self.token, self.root, self.process, self.log = url, token, root, process, log

    def log_text(self):
        self.log.flush()
        return pathlib.Path(self.log.name).read_text(errors="replace")[-4000:]


@pytest.fixture(scope="session")
def lab():
    reason = _why_not()
    if reason:
        pytest.skip(reason)
    home = pathlib.Path(tempfile.mkdtemp(prefix="xe-e2e-"))
    root, data, settings = home / "root", home / "data", home / "settings"
    root.mkdir()
    # the kernel is this Python (the venv's), whatever other kernel specs the machine has
    kernel = data / "kernels" / "python3"
    kernel.mkdir(parents=True)
    (kernel / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3", "language": "python"}))
    for rel, value in _LAB_SETTINGS.items():
        path = settings / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))
    env = dict(os.environ, JUPYTER_DATA_DIR=str(data), JUPYTER_CONFIG_DIR=str(home / "config"),
               JUPYTER_RUNTIME_DIR=str(home / "runtime"), IPYTHONDIR=str(home / "ipython"),
               JUPYTERLAB_SETTINGS_DIR=str(settings), JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
               MPLBACKEND="module://matplotlib_inline.backend_inline")
    port, token = _free_port(), secrets.token_hex(16)
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--ServerApp.ip=127.0.0.1",
           f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
           f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    log = open(home / "jupyterlab.log", "w+")
    process = subprocess.Popen(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    server = Lab(f"http://127.0.0.1:{port}", token, root, process, log)
    try:
        deadline = time.monotonic() + 90
        while True:
            if process.poll() is not None:
                pytest.fail(f"JupyterLab exited with {process.returncode}:\n{server.log_text()}")
            try:
                with urllib.request.urlopen(f"{server.url}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"JupyterLab did not answer on {server.url} in 90 s:\n{server.log_text()}")
            time.sleep(0.3)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def browser(lab):
    from playwright.sync_api import sync_playwright
    # launch() gives the browser a fresh temporary profile (Playwright refuses --user-data-dir)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser, request):
    """A fresh tab (1400 x 1000); on failure a screenshot ``<test name>_failed.png`` is saved."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    pg.set_default_timeout(30_000)
    yield pg
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        try:
            screenshot(pg, f"{request.node.name}_failed")
        except Exception:
            pass
    context.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


# -- what a test drives: a notebook in the browser ---------------------------------------------

_NOTEBOOK_STATE = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  const kernel = w.sessionContext.session && w.sessionContext.session.kernel;
  const cells = w.content.widgets.filter(c => c.model.type === 'code');
  const errors = [];
  for (const c of cells) {
    for (const o of c.model.outputs.toJSON()) {
      if (o.output_type === 'error') errors.push(o.ename + ': ' + o.evalue + '\\n' + (o.traceback || []).join('\\n'));
    }
  }
  const done = cells.filter(c => c.model.executionCount !== null).length;
  return {status: kernel ? kernel.status : 'none', done: done, total: cells.length, errors: errors};
}"""

_EXECUTE = """async (code) => {
  const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
  const future = kernel.requestExecute({code: code, silent: false, store_history: false});
  let text = '', error = null;
  future.onIOPub = (msg) => {
    const t = msg.header.msg_type;
    if (t === 'stream') text += msg.content.text;
    else if (t === 'error') error = msg.content.ename + ': ' + msg.content.evalue;
  };
  await future.done;
  return {text: text, error: error};
}"""

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture
def notebook(lab, page):
    """A ``Notebook`` on a fresh tab of the session's JupyterLab."""
    return Notebook(lab, page)


class Notebook:
    """One notebook open in JupyterLab, driven as a student would (see tests/e2e/README.md)."""

    def __init__(self, lab, page):
        self.lab, self.page = lab, page

    def open(self, source, name=None):
        """Copy a notebook into the server's root (outputs stripped, so that what the page
        shows comes from this run) and open it; returns its name there.  ``source`` is a
        path (relative to the repository root, or absolute) or an ``nbformat.NotebookNode``."""
        import nbformat
        if isinstance(source, (str, pathlib.Path)):
            path = pathlib.Path(source)
            path = path if path.is_absolute() else ROOT / path
            nb = nbformat.read(path, as_version=4)
            name = name or path.name
        else:
            nb, name = source, name or "test.ipynb"
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nb.metadata.pop("widgets", None)  # no saved widget state: the views come from the live kernel
        nbformat.write(nb, self.lab.root / name)
        self.page.goto(f"{self.lab.url}/lab/tree/{name}?token={self.lab.token}")
        self.page.wait_for_function(
            """(name) => { const app = window.jupyterapp; if (!app) return false;
                 const w = app.shell.currentWidget;
                 return !!(w && w.context && w.context.path.endsWith(name) && w.sessionContext
                           && w.sessionContext.session && w.sessionContext.session.kernel
                           && w.sessionContext.session.kernel.connectionStatus === 'connected'
                           && w.content && w.content.widgets.length > 0); }""",
            arg=name, timeout=60_000)
        return name

    def run_all(self, timeout=RUN_TIMEOUT_S):
        """Run every cell, wait until the last one is done, the kernel idle and every widget
        drawn; a cell that raises fails the test with its traceback."""
        self.page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        deadline, state = time.monotonic() + timeout, None
        while time.monotonic() < deadline:
            state = self.page.evaluate(_NOTEBOOK_STATE)
            if state["errors"]:
                pytest.fail("a notebook cell raised in the browser:\n" + _ANSI.sub("", state["errors"][0]))
            if state["done"] == state["total"] and state["status"] == "idle":
                self.wait_for_widgets()
                return state
            time.sleep(0.25)
        pytest.fail(f"the notebook did not finish in {timeout:.0f} s: {state}")

    def wait_for_widgets(self, timeout=30_000):
        """Wait until no widget view is still loading (ipywidgets shows 'Loading widget...')."""
        self.page.wait_for_function(
            """() => !Array.from(document.querySelectorAll('.jp-OutputArea-output'))
                       .some(e => e.textContent.includes('Loading widget...'))""", timeout=timeout)

    def execute(self, code):
        """Run ``code`` in the notebook's kernel (no new cell); returns what it printed.  To read
        a traitlet: ``notebook.execute("print(pg.shape_text)")``."""
        out = self.page.evaluate(_EXECUTE, code)
        if out["error"]:
            pytest.fail(f"kernel code {code!r} raised {out['error']}")
        return out["text"]

    def scope(self, within=None):
        if within is None:
            return self.page
        return self.page.locator(within) if isinstance(within, str) else within

    def control(self, description, within=None):
        """The widget whose description (its label) is exactly ``description``: a Dropdown,
        IntText, Checkbox, ... or a composite control whose first child is a label with that
        text.  ``within`` (a CSS selector or a locator) narrows the search, e.g. to one widget
        with ``".xe-playground"``.  The match must be unique."""
        d = json.dumps(description)
        # a Checkbox shows its description in a span beside the box, the others in a label
        loc = self.scope(within).locator(f".jupyter-widgets:has(> .widget-label:text-is({d})), "
                                         f".jupyter-widgets:has(> .widget-label-basic > span:text-is({d}))")
        loc.first.wait_for(state="visible")
        n = loc.count()
        assert n == 1, f"{n} widgets are labelled {description!r}; narrow the search with within="
        return loc

    def set_control(self, description, value, within=None):
        """Set a control as a user would: pick an option, tick a box, or type into its text
        boxes and press Enter (a list of values for several boxes: per-dimension controls;
        an operand's first box is its shape).  For a composite's dropdown, use
        ``control(...).locator("select")`` and Playwright's ``select_option``."""
        ctl = self.control(description, within)
        inputs = ctl.locator("input:not([type=checkbox]):visible, textarea:visible")
        select = ctl.locator("select")
        if select.count() and not inputs.count():
            select.first.select_option(label=str(value))
            return ctl
        box = ctl.locator("input[type=checkbox]")
        if box.count() and not inputs.count():
            box.first.set_checked(bool(value))
            return ctl
        values = list(value) if isinstance(value, (list, tuple)) else [value]
        assert inputs.count() >= len(values), \
            f"{description!r} has {inputs.count()} inputs, got {len(values)} values"
        for k, v in enumerate(values):
            field = inputs.nth(k)
            field.fill(str(v))
            field.press("Enter")
        return ctl

    def screenshot(self, name, target=None):
        """Save ``tests/e2e/artifacts/<name>.png``: the window, or one element (a locator)."""
        return screenshot(self.page, name, target)

    def illegible(self, target):
        """What a student could not read in ``target`` (a locator) as drawn now: text smaller
        than 10 px (SVG text as scaled on screen) and text cut off by a box that hides its
        overflow (a pan-and-zoom view, ``.xe-view``, is meant to).  ``[]`` when all is legible."""
        return target.evaluate(_ILLEGIBLE)


# every element drawn (a hidden tab's are not) with text of its own: its size on screen,
# and whether a box that hides overflow cuts it
_ILLEGIBLE = """(root) => {
  const out = [];
  for (const el of [root, ...root.querySelectorAll('*')]) {
    const r = el.getBoundingClientRect();
    if (!r.width || !r.height) continue;
    const text = Array.from(el.childNodes).filter(n => n.nodeType === 3 && n.textContent.trim())
                      .map(n => n.textContent.trim()).join(' ');
    const cs = getComputedStyle(el);
    if (text) {
      let px = parseFloat(cs.fontSize);
      if (el instanceof SVGElement && el.getScreenCTM && el.getScreenCTM()) {
        const m = el.getScreenCTM();
        px *= Math.sqrt(Math.abs(m.a * m.d - m.b * m.c));
      }
      if (px < 9.95) out.push(`${px.toFixed(1)} px: ${el.tagName} ${text.slice(0, 40)}`);
    }
    if (el instanceof SVGElement || el.closest('.xe-view')) continue;
    const hides = ['hidden', 'clip'].includes(cs.overflowX) || cs.textOverflow === 'ellipsis';
    if (hides && el.scrollWidth > el.clientWidth + 2 && (el.textContent || '').trim())
      out.push(`cut (${el.scrollWidth} px in ${el.clientWidth}): ${el.tagName}.${el.className} `
               + el.textContent.trim().slice(0, 40));
  }
  return out;
}"""


def screenshot(page, name, target=None):
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    (target or page).screenshot(path=str(path))
    return path
