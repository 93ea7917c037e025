"""Keeping the exercise checkers honest (issue 31): every solution passes its checker and every plausible wrong answer
fails, at every seed offset of the sweep.

A chapter's test file (tests/test_exercises_<chapter>.py) defines `WRONG = {"<chapter>.<n>": [wrong, wrong, ...]}`
(the wrong answers live here, not in the book) and calls `chapter_tests("<chapter>", WRONG)`, which returns three tests:

* every registered exercise with a checker is run on the answer its solutions notebook gives (the name in
  `Exercise.solution`, which a cell of the notebook must assign: a name that only comes from the exported module does
  not count), with the cases drawn from `seed(k)`: it must pass;
* every wrong answer must fail with status "failed" (a verdict on what came back). A wrong answer that is meant to
  raise (status "error") is marked with `raises(wrong)` in WRONG; "error" is also accepted for the pairs listed in
  `ALLOW_ERROR` below, wrong answers that raise today and are to be marked or replaced. "missing" and "internal"
  never count as a failure: they are a broken wrong answer or a broken checker;
* every checker has at least two wrong answers, and every exercise of the chapter has a section in the solutions
  notebook: a markdown cell with the anchor `{#sol-<chapter>-<n>}` (followed by a space or `}`: sol-vi-1 is not
  sol-vi-10).

The solutions notebook (nbs/solutions/*.ipynb whose `default_exp` is the chapter's checker module) is executed in this
process, cell by cell, skipping
* the `#| export`, `#| exporti`, `#| exports` and `#| default_exp` cells (the checkers are tested as the package exports
  them; what these cells define is taken from the package, as in the notebook's kernel),
* the cells that contain `check(` (the notebook's own verdicts and its hidden asserts on them; the test makes its own
  with the sweep's seed),
* the cells marked `#| eval: false` (not run when the site is built either),
and, in the cells it runs, the lines that start with `%` or `!` (IPython magics and shell commands). Each cell is
compiled under a name like IPython's (`<ipython-input-<i>-<notebook>>`) so that a verdict points to the cell's line.
"""
import json
import linecache
import os
import re
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "nbs" / "solutions"
SKIP_CELL = re.compile(r"^#\|\s*(export[si]?|default_exp)\b", re.M)
NO_EVAL = re.compile(r"^#\|.*\beval:\s*false", re.M)

# (exercise id, index in WRONG) of the wrong answers that may give "error" instead of "failed": they raise on the
# checker's cases (at rng=17 and the other seeds tried). Trim this list as the chapters mark them with `raises(...)`
# or replace them by wrong answers that return a wrong value.
ALLOW_ERROR = set()


def raises(wrong):
    "Mark a wrong answer (a function) as meant to raise on the checker's cases: status \"error\" counts as a failure."
    wrong.__expected_to_raise__ = True
    return wrong


def solutions_notebook(chapter):
    from bayesnotes.exercises import CHAPTERS
    module = CHAPTERS[chapter]
    for nb in [*sorted(SOLUTIONS.glob("*.ipynb")), ROOT / "nbs" / "00e_exercises.ipynb"]:
        cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
        if any(re.search(rf"^#\|\s*default_exp\s+{module}\s*$", "".join(c["source"]), re.M) for c in cells):
            return nb
    raise AssertionError(f"no notebook in nbs/solutions/ exports bayesnotes.{module}")


_ASSIGNED: dict = {}   # chapter -> the names that a cell of its solutions notebook (re)bound


@lru_cache(maxsize=None)
def solutions(chapter):
    "The namespace left by running the chapter's solutions notebook (without its export and check cells)."
    nb = solutions_notebook(chapter)
    import importlib
    from bayesnotes.exercises import CHAPTERS
    # the export cells are skipped, but what they define is there, from the package (as in the notebook's kernel)
    ns = {k: v for k, v in vars(importlib.import_module(f"bayesnotes.{CHAPTERS[chapter]}")).items()
          if not k.startswith("__")}
    ns["__name__"] = f"solutions_{chapter}"
    assigned = set()
    cwd = os.getcwd()
    os.chdir(nb.parent)
    try:
        for i, cell in enumerate(json.loads(nb.read_text(encoding="utf-8"))["cells"]):
            src = "".join(cell["source"])
            if cell["cell_type"] != "code" or SKIP_CELL.search(src) or "check(" in src or NO_EVAL.search(src):
                continue
            code = "\n".join(l for l in src.splitlines() if not l.lstrip().startswith(("%", "!")))
            name = f"<ipython-input-{i}-{nb.stem}>"
            linecache.cache[name] = (len(code), None, [l + "\n" for l in code.splitlines()], name)
            before = {k: id(v) for k, v in ns.items()}
            exec(compile(code, name, "exec"), ns)
            assigned |= {k for k, v in ns.items() if before.get(k) != id(v)}
    finally:
        os.chdir(cwd)
        import matplotlib.pyplot as plt
        plt.close("all")
    _ASSIGNED[chapter] = assigned
    return ns


def _checked(chapter):
    from bayesnotes.exercises import exercises
    return [e.id for e in exercises(chapter) if e.checker is not None]


def chapter_tests(chapter, wrong):
    "The three tests of one chapter's checkers (see the module docstring)."
    from bayesnotes.exercises import exercises
    ids = _checked(chapter)

    @pytest.mark.parametrize("ex_id", ids)
    def test_solution_passes(ex_id, seed):
        from bayesnotes.exercises import check, get_exercise
        ex = get_exercise(ex_id)
        ns = solutions(chapter)
        assert ex.solution in ns, f"{ex_id}: the solutions notebook defines no `{ex.solution}`"
        assert ex.solution in _ASSIGNED[chapter], (f"{ex_id}: no cell of the solutions notebook assigns `{ex.solution}` "
                                                   f"(it comes from the exported module, not from a solution cell)")
        res = check(ex_id, ns[ex.solution], rng=seed(17))
        assert res.passed, res.message

    cases = [(i, j) for i in ids for j in range(len(wrong.get(i, [])))]

    @pytest.mark.parametrize("ex_id,j", cases, ids=[f"{i}-wrong{j}" for i, j in cases])
    def test_wrong_answer_fails(ex_id, j, seed):
        from bayesnotes.exercises import check
        w = wrong[ex_id][j]
        res = check(ex_id, w, rng=seed(17))
        ok = ("failed", "error") if getattr(w, "__expected_to_raise__", False) or (ex_id, j) in ALLOW_ERROR else ("failed",)
        assert res.status in ok, f"wrong answer {j} to {ex_id} (status {res.status}, expected {ok}): {res.message}"

    def test_every_checker_has_two_wrong_answers():
        few = {i: len(wrong.get(i, [])) for i in ids if len(wrong.get(i, [])) < 2}
        assert not few, f"checkers with fewer than two wrong answers in tests/: {few}"
        assert not set(wrong) - set(ids), f"wrong answers for unknown exercises: {set(wrong) - set(ids)}"
        cells = json.loads(solutions_notebook(chapter).read_text(encoding="utf-8"))["cells"]
        text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        missing = [e.id for e in exercises(chapter)
                   if not re.search(rf"\{{#sol-{re.escape(chapter)}-{e.id.split('.')[1]}[\s}}]", text)]
        assert not missing, f"exercises without a solution section ({{#sol-<chapter>-<n>}} in a markdown cell): {missing}"

    return test_solution_passes, test_wrong_answer_fails, test_every_checker_has_two_wrong_answers
