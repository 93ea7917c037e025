"""Every chapter opens with what it teaches and closes with what to remember, and every main chapter leads to its
sub-chapters (issue 30): the frame a reader, and a lecturer choosing chapters, reads first."""
import json
import re
from pathlib import Path

import pytest

NBS = Path(__file__).resolve().parents[1] / "nbs"
CHAPTERS = sorted(NBS.glob("0*.ipynb"))
GOALS = "**In this chapter you will learn:**"
REMEMBER = re.compile(r"^## What to remember \{#what-to-remember \.unnumbered\}\s*$")
BULLET = re.compile(r"^[-*] \S")
# headings that may follow the summary: the problem set's link, figure regeneration and the API reference
AFTER = ("Problems", "Regenerate the figures", "API reference")


def _md(nb):
    return ["".join(c["source"]) for c in json.loads(nb.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "markdown"]


def _bullets_after(lines, i):
    "The bullet lines of the list that starts after line i (blank lines before it skipped; the list ends at a non-bullet)."
    j = i + 1
    while j < len(lines) and not lines[j].strip():
        j += 1
    out = []
    while j < len(lines) and (BULLET.match(lines[j]) or (out and lines[j].startswith("  ") and lines[j].strip())):
        if BULLET.match(lines[j]):
            out.append(lines[j])
        j += 1
    return out


@pytest.mark.parametrize("nb", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_opens_with_its_goals(nb):
    first = _md(nb)[0].splitlines()
    at = [i for i, line in enumerate(first) if line.strip() == GOALS]
    assert len(at) == 1, f"{nb.name}: the title cell needs one line '{GOALS}' followed by a list"
    before = [i for i, line in enumerate(first) if line.startswith("**Before this chapter:**")]
    assert before and before[0] < at[0], f"{nb.name}: the goals follow the 'Before this chapter' line"
    goals = _bullets_after(first, at[0])
    assert 3 <= len(goals) <= 6, f"{nb.name}: {len(goals)} goals; give 3 to 6"


@pytest.mark.parametrize("nb", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_closes_with_what_to_remember(nb):
    md = _md(nb)
    cells = [k for k, s in enumerate(md) if REMEMBER.match(s.splitlines()[0] if s else "")]
    assert len(cells) == 1, f"{nb.name}: one cell opening with '## What to remember {{#what-to-remember .unnumbered}}'"
    lines = md[cells[0]].splitlines()
    points = [line for line in lines[1:] if BULLET.match(line)]
    assert 3 <= len(points) <= 8, f"{nb.name}: {len(points)} points to remember; give 3 to 8"
    assert not any(re.match(r"^## Summary\b", s) for s in md), f"{nb.name}: the old '## Summary' is now 'What to remember'"
    later = [h for s in md[cells[0] + 1:] for h in re.findall(r"^## (.+)$", s, re.M)]
    assert all(h.startswith(AFTER) for h in later), f"{nb.name}: sections after 'What to remember': {later}"


MAIN = [p for p in CHAPTERS if re.match(r"0[1-8]_", p.name)]


@pytest.mark.parametrize("nb", MAIN, ids=lambda p: p.stem)
def test_main_chapter_links_its_sub_chapters(nb):
    subs = sorted(NBS.glob(nb.name[:2] + "[b-z]_*.ipynb"))
    text = "\n".join(_md(nb))
    missing = [s.name for s in subs if f"({s.name}" not in text]
    assert not missing, f"{nb.name} does not link its sub-chapters {missing}"
