"""The notebooks are the source: the committed package must be exactly what nbdev_export makes from them,
and the notebooks must be clean (nbdev_clean changes nothing). Both are checked in a scratch copy."""
import filecmp
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _diff(a: Path, b: Path, ignore=("__pycache__", ".ipynb_checkpoints")):
    "Relative paths that differ between two trees (missing on either side, or different content)."
    out = []
    cmp = filecmp.dircmp(a, b, ignore=list(ignore))
    def walk(c, rel):
        out.extend(str(rel / n) for n in c.left_only + c.right_only + c.diff_files + c.funny_files)
        for n, sub in c.subdirs.items():
            walk(sub, rel / n)
    walk(cmp, Path("."))
    # dircmp compares shallowly by stat signature; confirm with content
    return [p for p in out if not ((a / p).is_file() and (b / p).is_file() and filecmp.cmp(a / p, b / p, shallow=False))]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    d = tmp_path_factory.mktemp("nbdev_sync")
    for name in ("settings.ini", "_quarto.yml"):
        shutil.copy2(ROOT / name, d / name)
    shutil.copytree(ROOT / "nbs", d / "nbs", symlinks=True, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    shutil.copytree(ROOT / "bayesnotes", d / "bayesnotes", ignore=shutil.ignore_patterns("__pycache__"))
    return d


def _run(code, cwd):
    r = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]


def test_package_matches_notebooks(scratch):
    _run("from nbdev.doclinks import nbdev_export; nbdev_export()", scratch)
    drift = _diff(ROOT / "bayesnotes", scratch / "bayesnotes")
    assert not drift, ("bayesnotes/ is out of step with the notebooks in these files: " + ", ".join(drift)
                       + ". Edit the notebook, not the .py; then run `.venv/bin/nbdev_export` and commit.")


def test_notebooks_are_clean(scratch):
    _run("from nbdev.clean import nbdev_clean; nbdev_clean()", scratch)
    drift = _diff(ROOT / "nbs", scratch / "nbs")
    assert not drift, ("these notebooks are not clean: " + ", ".join(drift)
                       + ". Run `.venv/bin/nbdev_clean` (and clear outputs) and commit.")


def test_no_stray_modules():
    "Every module in the package comes from a notebook's default_exp (nothing hand-written)."
    import json
    exported = set()
    for nb in (ROOT / "nbs").rglob("*.ipynb"):
        for cell in json.loads(nb.read_text())["cells"]:
            src = "".join(cell["source"])
            if cell["cell_type"] == "code" and "#| default_exp" in src:
                exported.add(src.split("#| default_exp", 1)[1].split()[0])
    modules = {p.stem for p in (ROOT / "bayesnotes").glob("*.py")} - {"__init__", "_modidx"}
    assert modules <= exported, f"modules without a notebook: {sorted(modules - exported)}"
