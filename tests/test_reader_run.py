"""The notebooks a reader opens from the site's Colab and Binder links run with the package alone (issue 30, item 4).

`make test-reader` (tools/run_reader.py) executes each of them in a fresh venv with only the lean package, ipykernel,
ipywidgets and matplotlib; CI runs it after `make test`. These are the fast static checks behind it, in `make test`:
every notebook with launch links is in the reader's run; its first code cell installs the package from the repository
URL of settings.ini when it is missing; and no cell imports a module that a reader's environment lacks (nbdev, pytest,
fastcore, tqdm, ArviZ, ...) except inside `try: ... except ImportError`.
"""
import ast
import configparser
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / "nbs"
sys.path.insert(0, str(ROOT / "tools"))
from run_reader import reader_notebooks  # noqa: E402

# What `make test-reader` installs (the lean package's requirements in settings.ini and what they bring, ipykernel,
# ipywidgets, matplotlib) and the standard library: importable without a guard.
READER_MODULES = {"numpy", "scipy", "matplotlib", "mpl_toolkits", "autograd", "sklearn", "threadpoolctl", "joblib",
                  "cycler", "bayesnotes", "ipywidgets", "IPython", "ipykernel"} | set(sys.stdlib_module_names)


def _cells(nb):
    return json.loads(Path(nb).read_text(encoding="utf-8"))["cells"]


def _code(cell):
    src = "".join(cell["source"])
    return re.sub(r"^(\s*)[%!].*$", r"\1pass", src, flags=re.M)   # a magic is not Python: a statement in its place


def unguarded_imports(code: str) -> list[str]:
    "Modules imported by `code` outside the reader's environment and outside a `try` that catches ImportError."
    tree = ast.parse(code)
    guarded = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
                h.type is None or any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError", "Exception")
                                      for n in ast.walk(h.type)) for h in node.handlers):
            guarded |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        else:
            continue
        bad += [n for n in names if n.split(".")[0] not in READER_MODULES and id(node) not in guarded]
    return bad


def test_unguarded_imports_finds_a_planted_import():
    assert unguarded_imports("import numpy as np\nfrom bayesnotes.mcmc import sample\nimport os") == []
    assert unguarded_imports("import pytest\nfrom nbdev.showdoc import *") == ["pytest", "nbdev.showdoc"]
    assert unguarded_imports("def f():\n    import tqdm\n") == ["tqdm"]
    assert unguarded_imports("try:\n    from nbdev.showdoc import *\nexcept ImportError:\n    pass") == []
    assert unguarded_imports("try:\n    import arviz\nexcept ValueError:\n    pass") == ["arviz"]   # wrong handler


def test_every_notebook_with_launch_links_is_run_by_the_reader_test():
    sys.path.insert(0, str(ROOT / "tools"))
    from build_site import PROSE_PAGES
    readme = configparser.ConfigParser()
    readme.read(ROOT / "settings.ini")
    landing = readme["DEFAULT"]["readme_nb"]
    linked = {p.relative_to(NBS).as_posix() for p in NBS.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts}
    linked -= PROSE_PAGES | {landing}
    assert {p.relative_to(NBS).as_posix() for p in reader_notebooks()} == linked


@pytest.mark.parametrize("nb", [p.relative_to(NBS).as_posix() for p in reader_notebooks()])
def test_runs_with_the_package_alone(nb):
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "settings.ini")
    url = cfg["DEFAULT"]["git_url"].rstrip("/")
    code = [c for c in _cells(NBS / nb) if c["cell_type"] == "code"]
    first = "".join(code[0]["source"])
    assert f'"bayesnotes @ git+{url}"' in first and "install" in first, (
        f"{nb}: the first code cell must install the package from {url} (Colab, Binder)")
    assert re.search(r'find_spec\("bayesnotes"\) is None|except ImportError', first), (
        f"{nb}: the install cell must install only when the package is missing")
    bad = {i: unguarded_imports(_code(c)) for i, c in enumerate(code)}
    bad = {i: b for i, b in bad.items() if b}
    assert not bad, f"{nb}: code cells import what a reader's Colab may lack, unguarded: {bad}"


# ------------------------------------------------------------------------------------------ folded in JupyterLab
CHAPTERS = sorted(NBS.glob("[0-9]*.ipynb"))


@pytest.mark.parametrize("nb", [p.name for p in CHAPTERS])
def test_jupyterlab_folds_what_a_student_need_not_read(nb):
    """Checks, setup and plumbing start folded in JupyterLab (`jupyter.source_hidden`, set by tools/tag_cells.py), no
    cell longer than a screen is open, and the code a reader scrolls past before the first figure is at most half of
    what it is with every cell open (issue 30, item 3; `python tools/tag_cells.py --report` prints the numbers)."""
    from tag_cells import SCREEN, directives, lines_before_figure, src
    cells = _cells(NBS / nb)
    for i, c in enumerate(cells):
        if c["cell_type"] != "code":
            continue
        opts, _, rest = directives(src(c))
        hidden = bool((c.get("metadata") or {}).get("jupyter", {}).get("source_hidden"))
        assert hidden or "hide" not in opts, f"{nb} cell {i}: a `#| hide` cell (checks or setup) is open in JupyterLab"
        assert hidden or sum(1 for l in rest if l.strip()) <= SCREEN, f"{nb} cell {i}: longer than a screen and open"
    before, after = lines_before_figure(cells, folding=False), lines_before_figure(cells)
    assert after <= before / 2, f"{nb}: {after} of {before} code lines before the first figure are open"


NO_EARLY_FIGURE_YET = {   # chapters still waiting for a motivating figure; strict: the entry must go when one is added
}


@pytest.mark.parametrize("nb", [pytest.param(p.name, marks=pytest.mark.xfail(reason=NO_EARLY_FIGURE_YET[p.name], strict=True))
                                if p.name in NO_EARLY_FIGURE_YET else p.name
                                for p in CHAPTERS if not p.name.startswith("00")])
def test_a_figure_motivates_the_chapter_early(nb):
    """Every chapter (the foundations 00* are the API guide) shows its first figure within `MOTIVATE_WORDS` words of
    prose (issue 30, item 3): the picture of the problem or the result comes before the machinery."""
    from tag_cells import MOTIVATE_WORDS, words_before_figure
    words = words_before_figure(_cells(NBS / nb))
    assert words <= MOTIVATE_WORDS, f"{nb}: {words} words of prose before the first figure (at most {MOTIVATE_WORDS})"


def test_words_before_figure_counts_prose_only():
    from tag_cells import words_before_figure
    md = lambda s: {"cell_type": "markdown", "source": s, "metadata": {}}
    fig = {"cell_type": "code", "source": "#| label: fig-x\nfig_x()", "metadata": {}}
    cells = [md("# Title <!-- a comment -->\nTwo [words](http://a.b/c) $x^2 + y$ and\n$$\\int f$$"), fig, md("after")]
    assert words_before_figure(cells) == 6       # Title, Two, words, and + one per formula; not the comment, URL or "after"
    assert words_before_figure([md("one two")]) == 2             # no figure: all the prose counts
def test_folding_survives_nbdev_clean():
    "nbdev_clean keeps only the cell metadata keys settings.ini allows: `jupyter` (the folding) must be one."
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "settings.ini")
    assert "jupyter" in cfg["DEFAULT"]["allowed_cell_metadata_keys"].split()
