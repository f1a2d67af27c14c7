"""ipywidgets UIs for xla_explorer (installed as xla_explorer.widgets)."""
