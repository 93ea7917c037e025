"""Keeping the exercise checkers honest (issue 31): every solution passes its checker and every plausible wrong answer
fails, at every seed offset of the sweep.

A chapter's test file (tests/test_exercises_<chapter>.py) defines `WRONG = {"<chapter>.<n>": [wrong, wrong, ...]}`
(the wrong answers live here, not in the book) and calls `chapter_tests("<chapter>", WRONG)`, which returns three tests:

* every registered exercise with a checker is run on the answer its solutions notebook gives (the name in
  `Exercise.solution`), with the cases drawn from `seed(k)`: it must pass;
* every wrong answer must fail (status "failed" or "error"; "missing" would be a broken wrong answer);
* every checker has at least two wrong answers, and every exercise of the chapter appears in the solutions notebook.

The solutions notebook (nbs/solutions/*.ipynb whose `default_exp` is the chapter's checker module) is executed in this
process, cell by cell, skipping the `#| export` cells (the checkers are tested as the package exports them) and the
cells that contain `check(` (the notebook's own verdicts and its hidden asserts on them; the test makes its own with the sweep's seed).
"""
import json
import os
import re
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "nbs" / "solutions"


def solutions_notebook(chapter):
    from bayesnotes.exercises import CHAPTERS
    module = CHAPTERS[chapter]
    for nb in [*sorted(SOLUTIONS.glob("*.ipynb")), ROOT / "nbs" / "00e_exercises.ipynb"]:
        cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
        if any(re.search(rf"^#\|\s*default_exp\s+{module}\s*$", "".join(c["source"]), re.M) for c in cells):
            return nb
    raise AssertionError(f"no notebook in nbs/solutions/ exports bayesnotes.{module}")


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
    cwd = os.getcwd()
    os.chdir(nb.parent)
    try:
        for cell in json.loads(nb.read_text(encoding="utf-8"))["cells"]:
            src = "".join(cell["source"])
            if cell["cell_type"] != "code" or re.search(r"^#\|\s*(export|exporti|default_exp)\b", src, re.M):
                continue
            if "check(" in src or re.search(r"^#\|.*\beval:\s*false", src, re.M):
                continue
            code = "\n".join(l for l in src.splitlines() if not l.lstrip().startswith(("%", "!")))
            exec(compile(code, f"{nb.name}", "exec"), ns)
    finally:
        os.chdir(cwd)
        import matplotlib.pyplot as plt
        plt.close("all")
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
        res = check(ex_id, ns[ex.solution], rng=seed(17))
        assert res.passed, res.message

    cases = [(i, j) for i in ids for j in range(len(wrong.get(i, [])))]

    @pytest.mark.parametrize("ex_id,j", cases, ids=[f"{i}-wrong{j}" for i, j in cases])
    def test_wrong_answer_fails(ex_id, j, seed):
        from bayesnotes.exercises import check
        res = check(ex_id, wrong[ex_id][j], rng=seed(17))
        assert res.status in ("failed", "error"), f"wrong answer {j} to {ex_id}: {res.message}"

    def test_every_checker_has_two_wrong_answers():
        few = {i: len(wrong.get(i, [])) for i in ids if len(wrong.get(i, [])) < 2}
        assert not few, f"checkers with fewer than two wrong answers in tests/: {few}"
        assert not set(wrong) - set(ids), f"wrong answers for unknown exercises: {set(wrong) - set(ids)}"
        text = solutions_notebook(chapter).read_text(encoding="utf-8")
        missing = [e.id for e in exercises(chapter) if e.id not in text]
        assert not missing, f"exercises without a solution section: {missing}"

    return test_solution_passes, test_wrong_answer_fails, test_every_checker_has_two_wrong_answers
