"""Progress bars in the notebook for long work (``xla_explorer.progress``).

``NotebookProgress`` listens to the library's tasks and shows one bar per top-level task
in the cell that runs it: at once for work announced as slow (a first Numba run compiles
its kernels), after ``delay`` seconds for the rest; work that ends sooner leaves nothing
behind.  Nested work (a while loop's iterations, a replica's run) shows in the bar's
text.  ``xla_explorer.widgets`` subscribes one when it is imported in a notebook kernel;
``show_progress(False)`` turns it off.
"""
import html

import ipywidgets as w

from xla_explorer import progress


class ProgressBar(w.HBox):
    """One task: its label, a bar (steps done of the total; bouncing when the total is
    unknown) and a line of text: what is going on, the time, how to stop it."""

    def __init__(self, task):
        self.label = w.HTML(f"<b>{html.escape(task.label)}</b>", layout=w.Layout(min_width="14em"))
        self.bar = w.FloatProgress(value=0, min=0, max=1, bar_style="info", layout=w.Layout(width="16em"))
        self.text = w.HTML(layout=w.Layout(width="auto"))
        super().__init__([self.label, self.bar, self.text], layout=w.Layout(align_items="center"))
        self.add_class("xe-progress")
        self.shown = False
        self.sub = ""
        self.show(task)

    def show(self, task):
        if task.total:
            self.bar.value = min(1.0, task.done / task.total)
            count = f"{task.done} of {task.total}"
        else:
            self.bar.value = (task.elapsed % 2) / 2  # no total: it moves, so the work is alive
            count = f"{task.done} done" if task.done else ""
        running = task.status == "running"
        parts = [p for p in (count, task.detail, self.sub, f"{task.elapsed:.1f} s" if running else "") if p]
        hint = " — interrupt the kernel (■) to stop" if running else ""
        self.text.value = f"<span style='font-size:12px'>{html.escape(' · '.join(parts))}{hint}</span>"

    def finish(self, task):
        self.bar.bar_style = {"done": "success", "interrupted": "warning"}.get(task.status, "danger")
        self.sub = f"{task.status} after {task.elapsed:.1f} s" if task.status != "done" else \
            f"done in {task.elapsed:.1f} s"
        compiled = getattr(task, "compiled", 0)
        if compiled:  # where a first run's time went
            self.sub += f" ({compiled} kernel{'s' if compiled > 1 else ''} compiled in {task.compile_seconds:.1f} s)"
        self.show(task)
        if task.status == "done":
            self.bar.value = 1.0


class NotebookProgress:
    """The listener (``progress.subscribe(NotebookProgress())``).  ``display`` puts a bar
    in the running cell's output (IPython's ``display`` by default)."""

    def __init__(self, delay=0.5, display=None):
        self.delay = delay
        self._display = display
        self.bars = {}  # id(task) -> ProgressBar, for the top-level tasks running

    def __call__(self, event):
        t = event.task
        if t.depth > 0:  # nested work: a line in the bar of the task it runs in
            top = next(iter(self.bars.values()), None)
            if top is not None:
                top.sub = f"{t.label}: {t.detail}" if event.kind != "end" else ""
            return
        if event.kind == "start":
            bar = self.bars[id(t)] = ProgressBar(t)
            if t.announce:
                self._show(bar)
        bar = self.bars.get(id(t))
        if bar is None:
            return
        if event.kind == "update":
            bar.show(t)
            if not bar.shown and t.elapsed >= self.delay:
                self._show(bar)
        elif event.kind == "end":
            del self.bars[id(t)]
            bar.finish(t)
            if bar.shown and t.status == "done" and t.elapsed < self.delay:
                bar.close()  # quick after all: leave nothing behind
                bar.shown = False

    def _show(self, bar):
        bar.shown = True
        if self._display is not None:
            self._display(bar)
        else:
            from IPython.display import display
            display(bar)


_listener = None


def show_progress(enabled=True, delay=0.5):
    """Show (or stop showing) progress bars for the library's long work in this notebook."""
    global _listener
    if _listener is not None:
        progress.unsubscribe(_listener)
        _listener = None
    if enabled:
        _listener = progress.subscribe(NotebookProgress(delay=delay))
    return _listener
