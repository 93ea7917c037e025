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


def wrap_label(label: str, width_pt: float, fontsize: float, weight: str = "normal") -> str:
    "A label word-wrapped (never cut) so that each line is at most `width_pt` points wide at `fontsize`."
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath

    prop, ttp = FontProperties(size=fontsize, weight=weight), TextToPath()
    wide = lambda s: ttp.get_text_width_height_descent(s, prop, ismath=False)[0]
    lines, cur = [], ""
    for w in label.split():
        if cur and wide(f"{cur} {w}") > width_pt:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}".strip()
    return "\n".join(lines + [cur])


def _number(name: str) -> str:
    "The chapter number a file shares with its main chapter: '04' for 04c_mh_variants.ipynb."
    return name[:2]


def graph_layout(chapters: dict) -> tuple[dict, dict, dict]:
    """Where `fig_chapter_graph` puts the chapters: (column of every core chapter by longest-path layer of the core
    graph, order of the core chapters in each column after a barycentre sweep, the anchor of every optional chapter).

    The anchor of an optional chapter is the core chapter under which it is stacked: its deepest core prerequisite
    with the same chapter number, else the core chapter of that number, else its deepest core prerequisite."""
    core = {n: c for n, c in chapters.items() if c.core}
    col = layers(core)
    anchor = {}
    for n, c in chapters.items():
        if c.core:
            continue
        pre = [f for _, f in c.prereqs if f in core]
        same = [f for f in pre if _number(f) == _number(n)]
        main = [f for f in core if _number(f) == _number(n)]
        cand = same or main or pre
        if cand:
            anchor[n] = max(cand, key=lambda f: (col[f], f))
    cols = {}
    for n in core:
        cols.setdefault(col[n], []).append(n)
    preds = {n: [f for _, f in core[n].prereqs if f in core] for n in core}
    succs = {n: [m for m in core if n in preds[m]] for n in core}
    rank = {n: i for names in cols.values() for i, n in enumerate(names)}
    for sweep in range(8):                             # barycentre sweeps, down then up the layers
        down = sweep % 2 == 0
        for k in (sorted(cols) if down else sorted(cols, reverse=True)):
            nbrs = preds if down else succs
            key = {n: (sum(rank[m] for m in nbrs[n]) / len(nbrs[n]) if nbrs[n] else rank[n]) for n in cols[k]}
            cols[k] = sorted(cols[k], key=lambda n: (key[n], rank[n]))
            rank.update({n: i for i, n in enumerate(cols[k])})
    return col, cols, anchor


def fig_chapter_graph(chapters: dict | None = None, labels: dict | None = None):
    """The chapter dependency graph as a matplotlib Figure (12 x 7 inches, text at 9 pt or more).

    The core chapters stand in columns by longest-path layer, ordered within a column by a barycentre sweep; each
    optional chapter is stacked in a smaller outlined box under its anchor (see `graph_layout`), the foundations
    pages under chapter 0. An arrow runs from each prerequisite to its chapter (solid), soft dependencies dashed;
    arrows are drawn behind the boxes, bent where a straight one would cross a box. Labels are wrapped, never cut.
    Every arrow carries the gid 'prerequisite->chapter' (soft ones 'soft:prerequisite->chapter')."""
    import numpy as np
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Patch

    chapters = read_chapters() if chapters is None else chapters
    labels = labels or {}
    col, cols, anchor = graph_layout(chapters)
    W, H, TOP = 12.0, 7.0, 6.45                        # data units are inches
    n_cols = max(cols) + 1
    DX = (W - 0.3) / n_cols                            # column pitch
    CW, SW, IND = DX * 0.84, DX * 0.76, DX * 0.12     # core box width, sub box width, indent of the sub boxes
    FC, FS, PAD, LH = 10.0, 9.0, 0.07, 1.18            # font sizes (pt), box padding (in), line height (em)
    core_c, opt_c, edge_c, soft_c, group_c = "#1f4e79", "#ffffff", "#3a3a3a", "#c0392b", "#eef2f7"

    text, size = {}, {}
    for n, ch in chapters.items():
        fs, w = (FC, CW) if ch.core else (FS, SW)
        text[n] = wrap_label(labels.get(n) or ch.title, (w - 2 * PAD) * 72 - 2, fs, "bold" if ch.core else "normal")
        size[n] = (w, (text[n].count("\n") + 1) * fs * LH / 72 + 2 * PAD)

    stack = {n: sorted(m for m in anchor if anchor[m] == n) for n in cols_flat(cols)}
    xc = {k: 0.15 + DX * (k + 0.5) for k in cols}
    box, GAP, SGAP = {}, 0.3, 0.09                     # name -> (x0, y0, x1, y1); gaps between blocks, stacked boxes
    core_pre = {n: [f for _, f in chapters[n].prereqs if f in chapters and chapters[f].core] for n in cols_flat(cols)}
    for k in sorted(cols):                             # priority placement: each block level with its prerequisites
        blocks = []
        for n in cols[k]:
            hs = [size[n][1]] + [SGAP + size[m][1] for m in stack[n]]
            ys = [(box[f][1] + box[f][3]) / 2 for f in core_pre[n]]
            want = (sum(ys) / len(ys) + size[n][1] / 2) if ys else TOP
            blocks.append([n, sum(hs), want])
        blocks.sort(key=lambda b: -b[2])               # order in the column by the prerequisites' height
        cols[k] = [b[0] for b in blocks]
        tops, y = [], TOP
        for n, h, want in blocks:                      # push down below the block above ...
            t = min(want, y, TOP)
            tops.append(t)
            y = t - h - GAP
        y = 0.15                                       # ... and up above the block below, within the drawing
        for i in range(len(blocks) - 1, -1, -1):
            n, h, _ = blocks[i]
            tops[i] = max(tops[i], y + h)
            y = tops[i] + GAP
        for (n, h, _), t in zip(blocks, tops):
            w, hn = size[n]
            box[n] = (xc[k] - w / 2, t - hn, xc[k] + w / 2, t)
            y = t - hn
            for m in stack[n]:
                w2, h2 = size[m]
                x0 = xc[k] - CW / 2 + IND
                box[m] = (x0, y - SGAP - h2, x0 + w2, y - SGAP)
                y -= SGAP + h2
    # optional chapters without any anchor go to the bottom of the last column
    y = min(b[1] for b in box.values()) - 0.2
    for n in chapters:
        if n not in box:
            w, h = size[n]
            box[n] = (xc[n_cols - 1] - w / 2, y - h, xc[n_cols - 1] + w / 2, y)
            y -= h + 0.08
    bottom = min(b[1] for b in box.values())
    if bottom < 0.1:                                   # squeeze vertically if the stacks are too tall
        s = (TOP - 0.1) / (TOP - bottom)
        box = {n: (b[0], TOP - (TOP - b[1]) * s, b[2], TOP - (TOP - b[3]) * s) for n, b in box.items()}
    centre = {n: ((b[0] + b[2]) / 2, (b[1] + b[3]) / 2) for n, b in box.items()}

    fig = plt.figure(figsize=(W, H))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, W)
    ax.set_ylim(0, H)
    ax.set_aspect("equal")
    ax.axis("off")

    # the foundations pages (the optional chapters numbered 0) on a shaded ground, titled
    fnd = [n for n in chapters if not chapters[n].core and _number(n) == "00" and n in anchor]
    if fnd:
        gx0, gy0 = min(box[n][0] for n in fnd) - 0.06, min(box[n][1] for n in fnd) - 0.06
        gx1, gy1 = max(box[n][2] for n in fnd) + 0.06, max(box[n][3] for n in fnd) + 0.06
        gy0 -= 0.22
        ax.add_patch(FancyBboxPatch((gx0, gy0), gx1 - gx0, gy1 - gy0, boxstyle="round,pad=0,rounding_size=0.06",
                                    fc=group_c, ec="none", zorder=0.5))
        fig.text((gx0 + gx1) / 2 / W, (gy0 + 0.04) / H, "foundations pages", ha="center", va="bottom", fontsize=9,
                 style="italic", color="#555555")

    patch = {}
    for n, (x0, y0, x1, y1) in box.items():
        ch = chapters[n]
        p = FancyBboxPatch((x0, y0), x1 - x0, y1 - y0, boxstyle="round,pad=0,rounding_size=0.05",
                           fc=core_c if ch.core else opt_c, ec=core_c, lw=1.2 if ch.core else 0.9,
                           ls="-" if ch.core else (0, (3, 2)), zorder=3)
        ax.add_patch(p)
        patch[n] = p
        ax.text(*centre[n], text[n], ha="center", va="center", fontsize=FC if ch.core else FS, zorder=4,
                fontweight="bold" if ch.core else "normal", color="white" if ch.core else "black", linespacing=LH)

    def hits(pts, skip, margin=0.05):
        "How many boxes (other than `skip`) the polyline `pts` enters, and how far it leaves the drawing."
        out = 0
        for n, (x0, y0, x1, y1) in box.items():
            if n in skip:
                continue
            inside = ((pts[:, 0] > x0 - margin) & (pts[:, 0] < x1 + margin) &
                      (pts[:, 1] > y0 - margin) & (pts[:, 1] < y1 + margin))
            out += bool(inside.any())
        off = (pts[:, 1] > TOP + 0.35).any() or (pts[:, 1] < 0.02).any() or (pts[:, 0] < 0.02).any() \
            or (pts[:, 0] > W - 0.02).any()
        return out + 3 * off

    def arc(a, b, rad):
        (x1, y1), (x2, y2) = a, b
        cx, cy = (x1 + x2) / 2 + rad * (y2 - y1), (y1 + y2) / 2 - rad * (x2 - x1)
        t = np.linspace(0, 1, 80)[:, None]
        return (1 - t) ** 2 * np.array(a) + 2 * t * (1 - t) * np.array((cx, cy)) + t ** 2 * np.array(b)

    def style(soft):
        return dict(arrowstyle="-|>", mutation_scale=10, lw=1.0 if not soft else 1.1, zorder=1,
                    color=soft_c if soft else edge_c, alpha=0.85 if not soft else 0.95,
                    ls=(0, (4, 2)) if soft else "-")

    used_trunks = {}
    for soft, es in ((False, edges(chapters)), (True, soft_edges(chapters))):
        for a, b in sorted(es):
            if a not in box or b not in box:
                continue
            gid = f"soft:{a}->{b}" if soft else f"{a}->{b}"
            ba, bb = box[a], box[b]
            if not soft and anchor.get(b) == a:        # a comb from the anchor down its stack
                xt = ba[0] + IND / 2
                arr = FancyArrowPatch((xt, ba[1]), (bb[0], (bb[1] + bb[3]) / 2 + 0.04), shrinkA=0, shrinkB=0,
                                      connectionstyle="angle,angleA=-90,angleB=180,rad=4", gid=gid, **style(soft))
                ax.add_patch(arr)
                continue
            if (b in anchor and ba[2] < bb[0] - 0.1 and col.get(anchor[b]) is not None
                    and box[anchor[b]][0] - ba[2] < DX * 0.5):
                # from the column to the left into a stacked box: along a trunk in the gap between the columns
                gap_l, gap_r = ba[2], box[anchor[b]][0]
                k = used_trunks.setdefault((round(gap_r, 2), a), len([t for t in used_trunks if t[0] == round(gap_r, 2)]))
                xt = gap_r - 0.06 - 0.06 * k
                if xt <= gap_l + 0.02:
                    xt = (gap_l + gap_r) / 2
                ya, yb = (ba[1] + ba[3]) / 2, (bb[1] + bb[3]) / 2 - 0.04
                arr = FancyArrowPatch((ba[2], ya), (bb[0], yb), shrinkA=0, shrinkB=0, gid=gid,
                                      connectionstyle=f"arc,angleA=0,angleB=180,armA={(xt - ba[2]) * 72},"
                                                      f"armB={(bb[0] - xt) * 72},rad=4", **style(soft))
                ax.add_patch(arr)
                continue
            best = None                                # try arcs, then elbow routes through the gaps between columns
            for rad in (0.0, 0.12, -0.12, 0.22, -0.22, 0.32, -0.32, 0.45, -0.45, 0.6, -0.6):
                r = rad + (0.15 if soft and rad == 0 else 0)
                score = hits(arc(centre[a], centre[b], r), {a, b}) + abs(r) * 0.8
                if best is None or score < best[0]:
                    best = (score, "arc3", r)
            if bb[0] - ba[2] > 0.1:
                ya, yb = (ba[1] + ba[3]) / 2, (bb[1] + bb[3]) / 2
                gaps = sorted({round(xc[k] - CW / 2 - (DX - CW) / 2, 3) for k in cols if ba[2] < xc[k] - CW / 2 <= bb[0]})
                for i, g in enumerate(gaps):           # horizontal, then vertical in a gap, then horizontal
                    for g2 in gaps[i:]:
                        pts = np.array([(ba[2], ya), (g, ya), (g, yb), (bb[0], yb)]) if g == g2 else \
                            np.array([(ba[2], ya), (g, ya), (g2, yb), (bb[0], yb)])
                        dense = np.concatenate([np.linspace(pts[j], pts[j + 1], 40) for j in range(3)])
                        score = hits(dense, {a, b}) + 0.5 + 0.2 * (g2 != g)
                        if score < best[0]:
                            best = (score, "elbow", (g, g2, ya, yb))
            if best[1] == "arc3":
                arr = FancyArrowPatch(centre[a], centre[b], patchA=patch[a], patchB=patch[b], shrinkA=1, shrinkB=1,
                                      connectionstyle=f"arc3,rad={best[2]}", gid=gid, **style(soft))
            else:
                g, g2, ya, yb = best[2]
                arr = FancyArrowPatch((ba[2], ya), (bb[0], yb), shrinkA=0, shrinkB=0, gid=gid,
                                      connectionstyle=f"arc,angleA=0,angleB=180,armA={(g - ba[2]) * 72},"
                                                      f"armB={(bb[0] - g2) * 72},rad=4", **style(soft))
            ax.add_patch(arr)

    handles = [Patch(fc=core_c, ec=core_c, label="core chapter"),
               Patch(fc=opt_c, ec=core_c, ls=(0, (3, 2)), label="optional chapter"),
               Line2D([], [], color=edge_c, lw=1.2, label="read first (prerequisite)"),
               Line2D([], [], color=soft_c, lw=1.2, ls=(0, (4, 2)), label="used ahead, or by one section")]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 1.0), ncol=4, frameon=False, fontsize=10,
              borderaxespad=0.3)
    return fig


def cols_flat(cols: dict) -> list:
    "The names of the columns of `graph_layout`, column by column."
    return [n for k in sorted(cols) for n in cols[k]]


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
