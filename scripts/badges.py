"""Writes the "launch on Binder" badges from the one place the repository's address is written:
``[project.urls] Repository`` in pyproject.toml.  The README gets one at its top (opening the
tour), every notebook one under its title (opening itself), in both halves of its jupytext
pair.  Change the address there and run ``python scripts/badges.py``; ``--check`` only lists
what is out of date (tests/test_binder.py runs it).
"""
import json
import pathlib
import re
import sys

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = None

ROOT = pathlib.Path(__file__).resolve().parents[1]
BRANCH = "main"
BADGE = re.compile(r"\[!\[Binder\]\(https://mybinder\.org/badge_logo\.svg\)\]\([^)]*\)")


def repository():
    """(owner, name) of the GitHub repository named in pyproject.toml."""
    text = (ROOT / "pyproject.toml").read_text()
    if tomllib is not None:
        url = tomllib.loads(text)["project"]["urls"]["Repository"]
    else:
        url = re.search(r'^Repository\s*=\s*"([^"]+)"', text, re.M).group(1)
    m = re.fullmatch(r"https://github\.com/([^/]+)/([^/]+?)(?:\.git)?/?", url)
    if not m:
        raise SystemExit(f"pyproject.toml: Repository = {url!r} is not a GitHub address; Binder's "
                         "gh/ launcher needs https://github.com/OWNER/NAME")
    return m.group(1), m.group(2)


def badge(notebook):
    """The Markdown badge that launches ``notebooks/<notebook>`` on mybinder.org."""
    owner, name = repository()
    return (f"[![Binder](https://mybinder.org/badge_logo.svg)](https://mybinder.org/v2/gh/{owner}/{name}/"
            f"{BRANCH}?labpath=notebooks%2F{notebook})")


def _with_badge(text, line, comment=""):
    """``text`` (Markdown, or a percent script's Markdown with ``comment`` '# ') with its badge
    replaced, or inserted after the first heading."""
    if BADGE.search(text):
        return BADGE.sub(lambda _: line, text, count=1)
    lines = text.split("\n")
    k = next((i for i, s in enumerate(lines) if s.startswith(comment + "# ")), 0)
    blank = comment.rstrip()
    return "\n".join(lines[:k + 1] + [blank, comment + line] + lines[k + 1:])


def updated():
    """{path: new text} for every file whose badge is missing or out of date."""
    out = {}
    readme = ROOT / "README.md"
    text = readme.read_text()
    new = _with_badge(text, badge("tour.ipynb"))
    if new != text:
        out[readme] = new
    for nb_path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        line = badge(nb_path.name)
        script = ROOT / "notebooks_py" / nb_path.with_suffix(".py").name
        if script.exists():
            text = script.read_text()
            start = text.index("# %% [markdown]") if "# %% [markdown]" in text else 0
            new = text[:start] + _with_badge(text[start:], line, "# ")
            if new != text:
                out[script] = new
        nb = json.loads(nb_path.read_text())
        first = next((c for c in nb["cells"] if c["cell_type"] == "markdown"), None)
        if first is not None:
            source = "".join(first["source"])
            new = _with_badge(source, line)
            if new != source:
                first["source"] = new.splitlines(keepends=True)
                out[nb_path] = json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    return out


def main(argv):
    changes = updated()
    if "--check" in argv:
        for path in changes:
            print(f"{path.relative_to(ROOT)}: its Binder badge is missing or does not match pyproject.toml")
        return 1 if changes else 0
    for path, text in changes.items():
        path.write_text(text)
        print(f"updated {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
