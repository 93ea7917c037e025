"""The reader's path through the book: chapter prerequisites, the dependency figure and the course tracks.

Every chapter notebook (nbs/0*.ipynb) declares, in its first markdown cell under the `> description` line, one line

    **Before this chapter:** [0 Foundations](00_core.ipynb), [1 Variational ...](01_vi.ipynb) · **Core**

and optionally, after the mark, a note whose links are *soft* dependencies: a later chapter the chapter uses ahead
("uses [4b MCMC diagnostics](04b_diagnostics.ipynb) ahead"), or a chapter that only one section needs. The links
before the mark are the chapter's direct prerequisites (the ones it uses itself; those of its prerequisites are not
repeated). `**Core**` marks the main line of the book, `**Optional**` a chapter a course may skip.

nbs/how_to_use.ipynb draws the graph with `fig_chapter_graph` (matplotlib only) and states three course tracks as
markdown tables, which `read_tracks` parses; tests/test_reader_path.py checks both against the declarations with
the same functions. Nothing here imports nbdev or the package, so the page runs wherever the repository is.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).absolute().parent.parent
NBS = ROOT / "nbs"

PREFIX = "**Before this chapter:**"
LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+\.ipynb)\)")
# the whole line: prerequisites (or "none"), the mark, then an optional note
LINE = re.compile(r"^\*\*Before this chapter:\*\* (?P<pre>none|\[[^\]]+\]\([^)\s]+\.ipynb\)(?:, \[[^\]]+\]\([^)\s]+\.ipynb\))*)"
                  r" · \*\*(?P<mark>Core|Optional)\*\*(?: · (?P<note>\S.*))?$")
CHAPTER_LINK = re.compile(r"\]\(\.\./(0[^)#/\s]*\.ipynb)(?:#[^)\s]*)?\)")  # from a problem set to a chapter
EX_ID = re.compile(r"^##\s+([a-z]+\.\d+)\s+·", re.M)

# Exercises whose extra chapter is named only in the introduction of their problem set, not in the exercise itself
# (nbs/exercises/03_montecarlo, 05_smc and 07_bnn; tests/test_reader_path.py checks that each intro says so).
EXERCISE_EXTRA = {"mc.9": {"03b_ais.ipynb"}, "mc.10": {"03b_ais.ipynb"}, "mc.12": {"03b_ais.ipynb"},
                  "smc.3": {"05b_gaussian_filters.ipynb"}, "smc.11": {"05c_particle_mcmc.ipynb"},
                  "bnn.5": {"01_vi.ipynb"}, "bnn.6": {"01_vi.ipynb"}, "bnn.13": {"04b_diagnostics.ipynb"}}


@dataclass
class Chapter:
    "One chapter notebook and what its 'Before this chapter' line declares."
    name: str                                   # file name, e.g. "04b_diagnostics.ipynb"
    title: str                                  # the `# Title` of its first cell
    prereqs: list = field(default_factory=list)  # [(label, file)] direct prerequisites
    mark: str = ""                              # "Core" or "Optional"
    soft: list = field(default_factory=list)    # [(label, file)] links of the note (used ahead, or by one section)
    line: str = ""                              # the line as written

    @property
    def core(self) -> bool: return self.mark == "Core"


def _src(cell) -> str:
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else s


def first_markdown(path: Path) -> str:
    "The source of a notebook's first markdown cell (the title cell)."
    cells = json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
    return next((_src(c) for c in cells if c["cell_type"] == "markdown"), "")


def prerequisite_lines(text: str) -> list[str]:
    "Every line of `text` that starts a 'Before this chapter' declaration."
    return [l for l in text.splitlines() if l.startswith(PREFIX)]


def parse_line(line: str) -> tuple[list, str, list]:
    "(prerequisites, mark, soft links) of one declaration line; ValueError if it is not well formed."
    m = LINE.match(line.strip())
    if m is None:
        raise ValueError(f"not a well-formed 'Before this chapter' line: {line!r}")
    pre = [] if m["pre"] == "none" else LINK.findall(m["pre"])
    return pre, m["mark"], LINK.findall(m["note"] or "")


def read_chapters(nbs: Path = NBS) -> dict[str, Chapter]:
    "The chapters (nbs/0*.ipynb) in file order, with their declarations; ValueError unless each has exactly one line."
    out = {}
    for p in sorted(Path(nbs).glob("0*.ipynb")):
        text = first_markdown(p)
        title = next((l[2:].strip() for l in text.splitlines() if l.startswith("# ")), p.stem)
        lines = prerequisite_lines(text)
        if len(lines) != 1:
            raise ValueError(f"{p.name}: {len(lines)} 'Before this chapter' lines in the first markdown cell, not 1")
        pre, mark, soft = parse_line(lines[0])
        out[p.name] = Chapter(p.name, title, pre, mark, soft, lines[0])
    return out


def edges(chapters: dict) -> set[tuple[str, str]]:
    "The prerequisite edges (prerequisite, chapter)."
    return {(f, c.name) for c in chapters.values() for _, f in c.prereqs}


def soft_edges(chapters: dict) -> set[tuple[str, str]]:
    "The soft edges (chapter used ahead or by one section, chapter)."
    return {(f, c.name) for c in chapters.values() for _, f in c.soft}


def find_cycle(nodes, edge_set) -> list | None:
    "A cycle of the directed graph as a list of nodes, or None when it is acyclic."
    succ = {n: [] for n in nodes}
    for a, b in edge_set:
        succ.setdefault(a, []).append(b)
        succ.setdefault(b, [])
    state, stack = {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(succ[n]):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state and (cyc := visit(m)):
                return cyc
        state[n] = 2
        stack.pop()
        return None

    for n in sorted(succ):
        if n not in state and (cyc := visit(n)):
            return cyc
    return None


def layers(chapters: dict) -> dict[str, int]:
    "Longest-path layer of every chapter: 0 without prerequisites, else one more than its deepest prerequisite."
    memo = {}

    def depth(n, seen=()):
        if n in seen:
            raise ValueError(f"the prerequisites have a cycle through {n}")
        if n not in memo:
            pre = [f for _, f in chapters[n].prereqs if f in chapters]
            memo[n] = 1 + max((depth(f, seen + (n,)) for f in pre), default=-1)
        return memo[n]

    return {n: depth(n) for n in chapters}


def ancestors(chapters: dict, name: str) -> set[str]:
    "Every chapter that `name` needs, directly or through other prerequisites."
    out, todo = set(), [f for _, f in chapters[name].prereqs]
    while todo:
        f = todo.pop()
        if f not in out:
            out.add(f)
            todo += [g for _, g in chapters[f].prereqs] if f in chapters else []
    return out


def short_label(label: str, width: int = 22) -> str:
    "A sidebar label wrapped onto at most two lines of about `width` characters, cut with an ellipsis if longer."
    words, lines, cur = label.split(), [], ""
    for w in words:
        if cur and len(cur) + 1 + len(w) > width:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}".strip()
    lines.append(cur)
    if len(lines) > 2:
        lines = [lines[0], lines[1].rstrip(",:") + "…"]
    return "\n".join(lines)


def fig_chapter_graph(chapters: dict | None = None, labels: dict | None = None):
    """The chapter dependency graph as a matplotlib Figure: one column per longest-path layer, an arrow from each
    prerequisite to its chapter (solid), soft dependencies dashed; core chapters filled, optional ones outlined.
    Every arrow carries the gid 'prerequisite->chapter' (soft ones 'soft:prerequisite->chapter')."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch

    chapters = read_chapters() if chapters is None else chapters
    labels = labels or {}
    lay = layers(chapters)
    cols = {}
    for n in chapters:                                # file order within a column to start with
        cols.setdefault(lay[n], []).append(n)
    n_rows = max(len(v) for v in cols.values())
    n_cols = max(cols) + 1
    dx, dy = 2.35, 0.78

    def place():
        out = {}
        for k, names in cols.items():
            top = (n_rows - len(names)) / 2          # centre each column vertically
            for i, n in enumerate(names):
                out[n] = (k * dx, -(top + i) * dy)
        return out

    pos = place()
    preds = {n: [f for _, f in chapters[n].prereqs if f in chapters] for n in chapters}
    succs = {n: [m for m in chapters if n in preds[m]] for n in chapters}
    for sweep in range(6):                            # barycentre ordering: fewer crossings, same columns
        for k in sorted(cols) if sweep % 2 == 0 else sorted(cols, reverse=True):
            nbrs = preds if sweep % 2 == 0 else succs
            key = {n: (sum(pos[m][1] for m in nbrs[n]) / len(nbrs[n]) if nbrs[n] else
                       (pos[n][1] if (preds[n] or succs[n]) else -1e9)) for n in cols[k]}
            cols[k] = sorted(cols[k], key=lambda n: -key[n])
            pos = place()
    fig, ax = plt.subplots(figsize=(n_cols * 1.62 + 0.3, n_rows * 0.54 + 0.9))
    core_c, opt_c, edge_c, soft_c = "#1f4e79", "#ffffff", "#333333", "#d62728"
    boxes = {}
    for n, (x, y) in pos.items():
        ch = chapters[n]
        text = short_label(labels.get(n) or ch.title)
        t = ax.text(x, y, text, ha="center", va="center", fontsize=8.6, zorder=3,
                    color="white" if ch.core else "black", linespacing=1.05,
                    bbox=dict(boxstyle="round,pad=0.32", fc=core_c if ch.core else opt_c,
                              ec=core_c, lw=1.1, ls="-" if ch.core else (0, (3, 2))))
        boxes[n] = t
    for style, es in (("solid", edges(chapters)), ("soft", soft_edges(chapters))):
        for a, b in sorted(es):
            if a not in pos or b not in pos:
                continue
            (xa, ya), (xb, yb) = pos[a], pos[b]
            rad = 0.0 if style == "solid" else 0.25
            if style == "solid" and abs(lay[b] - lay[a]) > 1:
                rad = 0.12                            # arrows that skip a column bend around its boxes
            arr = FancyArrowPatch((xa, ya), (xb, yb), patchA=boxes[a].get_bbox_patch(), patchB=boxes[b].get_bbox_patch(),
                                  arrowstyle="-|>", mutation_scale=9, lw=0.9 if style == "solid" else 1.0,
                                  color=edge_c if style == "solid" else soft_c, alpha=0.75 if style == "solid" else 0.9,
                                  ls="-" if style == "solid" else (0, (4, 2)), connectionstyle=f"arc3,rad={rad}",
                                  zorder=2, gid=(f"{a}->{b}" if style == "solid" else f"soft:{a}->{b}"))
            ax.add_patch(arr)
    ax.set_xlim(-dx * 0.55, (n_cols - 1) * dx + dx * 0.55)
    ax.set_ylim(-(n_rows - 1) * dy - dy * 0.8, dy * 0.8)
    ax.axis("off")
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    handles = [Patch(fc=core_c, ec=core_c, label="core chapter"),
               Patch(fc=opt_c, ec=core_c, ls=(0, (3, 2)), label="optional chapter"),
               Line2D([], [], color=edge_c, lw=1, label="read first (prerequisite)"),
               Line2D([], [], color=soft_c, lw=1, ls=(0, (4, 2)), label="used ahead, or by one section")]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 1.0), ncol=4, frameon=False, fontsize=8.6,
              borderaxespad=0)
    fig.tight_layout(pad=0.2)
    return fig


def drawn_edges(fig) -> tuple[set, set]:
    "(prerequisite edges, soft edges) drawn in a figure of `fig_chapter_graph`, read back from the arrows' gids."
    hard, soft = set(), set()
    for ax in fig.axes:
        for p in ax.patches:
            gid = p.get_gid() or ""
            if "->" in gid:
                a, b = gid.removeprefix("soft:").split("->")
                (soft if gid.startswith("soft:") else hard).add((a, b))
    return hard, soft


# ------------------------------------------------------------------------------------------ sidebar and exercises
def sidebar_labels(quarto: Path = ROOT / "_quarto.yml") -> list[tuple[str, str]]:
    "(href, text) of every sidebar entry of _quarto.yml, sections flattened, in order."
    import yaml

    out = []

    def walk(items):
        for it in items:
            if isinstance(it, str):
                out.append((it, ""))
            elif "contents" in it:
                walk(it["contents"])
            elif "href" in it:
                out.append((it["href"], str(it.get("text", ""))))

    walk(yaml.safe_load(Path(quarto).read_text(encoding="utf-8"))["website"]["sidebar"]["contents"])
    return out


def exercises(folder: Path = NBS / "exercises") -> dict[str, set[str]]:
    """Every exercise id of the problem sets (`## mcmc.3 · ...` headings) with the chapters it builds on: the problem
    set's chapter, the chapters its own text links to, and those of `EXERCISE_EXTRA`."""
    out = {}
    for p in sorted(Path(folder).glob("*.ipynb")):
        cells = json.loads(p.read_text(encoding="utf-8"))["cells"]
        current = None
        for c in cells:
            s = _src(c)
            if c["cell_type"] == "markdown" and (m := EX_ID.match(s)):
                current = m.group(1)
                out[current] = {p.name}
            elif c["cell_type"] == "markdown" and s.lstrip().startswith("#"):
                current = None if re.match(r"#{1,2}\s", s.lstrip()) else current
            if current and c["cell_type"] == "markdown":
                out[current] |= set(CHAPTER_LINK.findall(s))
    for k, extra in EXERCISE_EXTRA.items():
        if k in out:
            out[k] |= extra
    return {k: {f for f in v if not f.startswith("00e_")} for k, v in out.items()}


# ------------------------------------------------------------------------------------------ course tracks
@dataclass
class Track:
    "A course track of the 'How to use this book' page."
    title: str
    assumes: list = field(default_factory=list)   # [(label, file)] chapters the track takes as read
    sessions: list = field(default_factory=list)  # [(session, [(label, file)], [exercise ids])]


def read_tracks(page: Path = NBS / "how_to_use.ipynb") -> list[Track]:
    """The course tracks of the page: each a `### Track ...` heading, an `Assumes:` line (chapter links or
    'nothing'), and a table whose rows are | session | chapter links and sections | exercise ids |."""
    cells = json.loads(Path(page).read_text(encoding="utf-8"))["cells"]
    text = "\n".join(_src(c) for c in cells if c["cell_type"] == "markdown")
    tracks, cur = [], None
    for line in text.splitlines():
        if line.startswith("### Track"):
            cur = Track(line[4:].strip())
            tracks.append(cur)
        elif cur is None:
            continue
        elif line.startswith("#"):
            cur = None
        elif line.startswith("**Assumes:**"):
            cur.assumes = LINK.findall(line)
        elif line.startswith("|") and not re.match(r"^\|\s*:?-", line):
            cells_ = [x.strip() for x in line.strip().strip("|").split("|")]
            if len(cells_) < 3 or not re.match(r"^\d+$", cells_[0]):
                continue                                           # the header row
            ids = re.findall(r"\b([a-z]+\.\d+)\b", cells_[2])
            cur.sessions.append((int(cells_[0]), LINK.findall(cells_[1]), ids))
    return tracks


def track_problems(track: Track, chapters: dict, exercise_needs: dict) -> list[str]:
    """What is wrong with a track: a chapter before its prerequisites (which must come in the same or an earlier
    session, or be assumed), a soft dependency neither in the track nor assumed, an unknown exercise id, or an
    exercise set before the chapters it builds on."""
    problems, seen = [], {f for _, f in track.assumes}
    everything = seen | {f for _, links, _ in track.sessions for _, f in links}
    for k, links, ids in track.sessions:
        seen |= {f for _, f in links}
        for _, f in links:
            if f not in chapters:
                problems.append(f"{track.title}, session {k}: {f} is no chapter")
                continue
            for _, p in chapters[f].prereqs:
                if p not in seen:
                    problems.append(f"{track.title}, session {k}: {f} needs {p}, which is neither earlier nor assumed")
            for _, p in chapters[f].soft:
                if p not in everything:
                    problems.append(f"{track.title}, session {k}: {f} uses {p} (ahead or in one section), "
                                    "which the track neither covers nor assumes")
        for e in ids:
            if e not in exercise_needs:
                problems.append(f"{track.title}, session {k}: no exercise {e}")
            elif missing := sorted(exercise_needs[e] - seen):
                problems.append(f"{track.title}, session {k}: exercise {e} builds on {missing}, not read by then")
    return problems
