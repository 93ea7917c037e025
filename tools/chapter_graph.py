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
EX_MENTION = re.compile(r"\b((?:vi|ep|mc|mcmc|smc|decision|bnn|vae)\.\d+)\b")  # an exercise id in a text

# Exercises whose extra chapter is named only in the introduction of their problem set, not in the exercise itself
# (nbs/exercises/03_montecarlo, 05_smc and 07_bnn; tests/test_reader_path.py checks that each intro says so).
EXERCISE_EXTRA = {"mc.9": {"03b_ais.ipynb"}, "mc.10": {"03b_ais.ipynb"}, "mc.12": {"03b_ais.ipynb"},
                  "smc.3": {"05b_gaussian_filters.ipynb"}, "smc.11": {"05c_particle_mcmc.ipynb"},
                  "bnn.5": {"01_vi.ipynb"}, "bnn.6": {"01_vi.ipynb"}, "bnn.13": {"04b_diagnostics.ipynb"}}

# Exercises that mention another exercise without building on it (tests/test_reader_path.py checks the mention is there)
EXERCISE_NOT_NEEDED = {"mcmc.7": {"mcmc.5"}}   # "run the chapter's integrator `mcmc.leapfrog` (not your own of mcmc.5)"


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
    from matplotlib.path import Path as MPath

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
                           ls="-" if ch.core else (0, (3, 2)), zorder=3, gid=f"box:{n}")
        ax.add_patch(p)
        patch[n] = p
        ax.text(*centre[n], text[n], ha="center", va="center", fontsize=FC if ch.core else FS, zorder=4,
                fontweight="bold" if ch.core else "normal", color="white" if ch.core else "black", linespacing=LH)

    def style(soft):
        return dict(arrowstyle="-|>", mutation_scale=10, lw=1.0 if not soft else 1.1, zorder=1,
                    color=soft_c if soft else edge_c, alpha=0.85 if not soft else 0.95,
                    ls=(0, (4, 2)) if soft else "-")

    # Routing. Every arrow is a polyline that enters no box but its two ends (`route` raises rather than accept one
    # that does): a comb from an anchor down its stack; otherwise the shortest free candidate among a straight
    # segment between facing sides, and routes that leave a side horizontally, run vertically in a gap between
    # columns (which holds no box), horizontally along a free channel (between boxes, or over the top of the
    # drawing), vertically in another gap and horizontally into a side of the target.
    CLEAR, LANE, HEAD = 0.03, 0.035, 0.08              # clearance from boxes, lane spacing, room for an arrowhead (in)
    names = list(box)
    idx = {n: i for i, n in enumerate(names)}
    R = np.array([box[n] for n in names])
    col_of = {n: col[n] if n in col else (col[anchor[n]] if n in anchor else n_cols - 1) for n in names}
    gap_x = []                                         # usable x-interval of the gap left of column k, k = 0..n_cols
    for k in range(n_cols + 1):
        lo = max((box[n][2] for n in names if col_of[n] == k - 1), default=0.05)
        hi = min((box[n][0] for n in names if col_of[n] == k), default=W - 0.05)
        gap_x.append((lo + CLEAR, hi - CLEAR))
    chan = set()                                       # y of horizontal channels: between boxes, and over the top
    for k in range(n_cols):
        ys = sorted((box[n][1], box[n][3]) for n in names if col_of[n] == k)
        for (_, top_), (bot_, _) in zip(ys, ys[1:]):
            if bot_ - top_ > 0.15:                     # not between a box and the next of its stack
                mid, half = (top_ + bot_) / 2, (bot_ - top_) / 2 - 2 * CLEAR
                chan |= {round(mid + s * j * LANE, 3) for j in range(3) for s in (-1, 1) if j * LANE <= half}
    chan |= {round(TOP + CLEAR + 0.03 + j * LANE, 3) for j in range(4)}
    drawn = []                                         # (vertical?, fixed coordinate, lo, hi, a, b) of drawn segments

    def blocked(P, a, b):
        "Whether the polyline P (k, 2) enters a box other than a and b (with clearance), or a or b away from its ends."
        p0, d = P[:-1, None, :], (P[1:] - P[:-1])[:, None, :]
        lo, hi = R[None, :, :2] - CLEAR, R[None, :, 2:] + CLEAR
        inside = (p0 > lo) & (p0 < hi)
        with np.errstate(divide="ignore", invalid="ignore"):
            t1, t2 = (lo - p0) / d, (hi - p0) / d
        tmin = np.where(d == 0, np.where(inside, -np.inf, np.inf), np.minimum(t1, t2)).max(2)
        tmax = np.where(d == 0, np.where(inside, np.inf, -np.inf), np.maximum(t1, t2)).min(2)
        hit = np.minimum(tmax, 1) - np.maximum(tmin, 0) > 1e-9          # (segments, boxes)
        own = hit[:, [idx[a], idx[b]]].copy()
        hit[:, [idx[a], idx[b]]] = False
        if hit.any() or own[1:, 0].any() or own[:-1, 1].any():        # the ends may only touch their own box
            return True
        return bool((P[:, 0] < 0.03).any() or (P[:, 0] > W - 0.03).any() or (P[:, 1] < 0.03).any()
                    or (P[:, 1] > TOP + 0.22).any())

    def overlap(P, a, b):
        "How much of P runs along an arrow already drawn that shares neither end with it."
        out = 0.0
        for p, q in zip(P[:-1], P[1:]):
            v = p[0] == q[0]
            if not v and p[1] != q[1]:
                continue
            f, lo_, hi_ = (p[0], *sorted((p[1], q[1]))) if v else (p[1], *sorted((p[0], q[0])))
            for v2, f2, lo2, hi2, a2, b2 in drawn:
                if v2 == v and abs(f2 - f) < 0.025 and a2 != a and b2 != b:
                    out += max(0.0, min(hi_, hi2) - max(lo_, lo2))
        return out

    def port(n, side, dy=0.0):
        x0, y0, x1, y1 = box[n]
        return np.array((x1 if side > 0 else x0, (y0 + y1) / 2 + dy))

    def route(a, b, soft):
        "The best free polyline from box a to box b (a soft one leaves and enters a little lower)."
        dy = -0.06 if soft else 0.0
        pb_dy = dy - (0.04 if b in anchor else 0.0)    # a stacked box's comb enters at +0.04
        cands = []
        ca, cb = centre[a], centre[b]
        if box[b][0] > box[a][2] or box[b][2] < box[a][0]:             # a straight segment between facing sides
            s = 1 if box[b][0] > box[a][2] else -1
            P = np.array([port(a, s, dy), port(b, -s, pb_dy)])
            cands.append((np.hypot(*(P[1] - P[0])) * (1.0 if P[0][1] == P[1][1] else 1.15), P, None))
        for sa in (1, -1):
            pa = port(a, sa, dy)
            for i1 in ((col_of[a] + 1, col_of[a] + 2) if sa > 0 else (col_of[a], col_of[a] - 1)):
                if not 0 <= i1 <= n_cols:
                    continue
                g1 = sum(gap_x[i1]) / 2
                for sb in (1, -1):
                    pb = port(b, sb, pb_dy)
                    for i2 in ((col_of[b] + 1, col_of[b] + 2) if sb > 0 else (col_of[b], col_of[b] - 1)):
                        if not 0 <= i2 <= n_cols:
                            continue
                        g2 = sum(gap_x[i2]) / 2
                        for yc in ({pa[1], pb[1]} | chan if i1 != i2 else {pa[1]}):
                            P = np.array([pa, (g1, pa[1]), (g1, yc), (g2, yc), (g2, pb[1]), pb])
                            keep = np.r_[True, np.any(np.diff(P, axis=0) != 0, axis=1)]
                            P = P[keep]
                            turns = len(P) - 2
                            cost = np.abs(np.diff(P, axis=0)).sum() + 0.35 * turns
                            cands.append((cost, P, (i1, i2)))
        best = None
        for cost, P, gaps_ in sorted(cands, key=lambda c: c[0]):
            if best is not None and cost >= best[0]:
                break
            if blocked(P, a, b):
                continue
            total = cost + 3 * overlap(P, a, b)
            if best is None or total < best[0]:
                best = (total, P, gaps_)
        if best is None:
            raise RuntimeError(f"no route from {a} to {b} avoids the other boxes")
        P, gaps_ = best[1].copy(), best[2]
        if gaps_ is not None:                          # spread the vertical runs over the lanes of their gaps
            gap_of = {round(sum(gap_x[i]) / 2, 9): i for i in gaps_}
            for j in range(len(P) - 1):
                i = gap_of.get(round(P[j][0], 9))
                if P[j][0] != P[j + 1][0] or i is None:
                    continue
                lo_, hi_ = gap_x[i]
                lanes = lo_ + (hi_ - lo_) * (np.arange(5) + 0.5) / 5
                ylo, yhi = sorted((P[j][1], P[j + 1][1]))

                def used(x):
                    return sum(min(yhi, h2) - max(ylo, l2) + 0.01 for v2, f2, l2, h2, a2, b2 in drawn
                               if v2 and abs(f2 - x) < 0.02 and a2 != a and b2 != b and min(yhi, h2) > max(ylo, l2))

                ok = [x for x in lanes if j + 2 < len(P) - 1 or abs(P[-1][0] - x) >= HEAD]
                x = min(ok or lanes, key=lambda x: (used(x), abs(x - P[j][0])))
                P[j][0] = P[j + 1][0] = x
        return P

    for soft, es in ((False, edges(chapters)), (True, soft_edges(chapters))):
        for a, b in sorted(es):
            if a not in box or b not in box:
                continue
            gid = f"soft:{a}->{b}" if soft else f"{a}->{b}"
            ba, bb = box[a], box[b]
            if not soft and anchor.get(b) == a:        # a comb from the anchor down its stack
                xt, yb = ba[0] + IND / 2, (bb[1] + bb[3]) / 2 + 0.04
                P = np.array([(xt, ba[1]), (xt, yb), (bb[0], yb)])
            else:
                P = route(a, b, soft)
            for p, q in zip(P[:-1], P[1:]):
                if p[0] == q[0] or p[1] == q[1]:
                    v = bool(p[0] == q[0])
                    drawn.append((v, p[0] if v else p[1], *sorted((p[1], q[1]) if v else (p[0], q[0])), a, b))
            ax.add_patch(FancyArrowPatch(path=MPath(P), gid=gid, **style(soft)))


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


def exercise_markdown(folder: Path = NBS / "exercises"):
    """(problem set file name, exercise id, markdown text) for every markdown cell of an exercise, in order: from its
    `## mcmc.3 · ...` heading cell up to the next heading of level 1 or 2."""
    for p in sorted(Path(folder).glob("*.ipynb")):
        current = None
        for c in json.loads(p.read_text(encoding="utf-8"))["cells"]:
            if c["cell_type"] != "markdown":
                continue
            s = _src(c)
            if m := EX_ID.match(s):
                current = m.group(1)
            elif s.lstrip().startswith("#") and re.match(r"#{1,2}\s", s.lstrip()):
                current = None
            if current:
                yield p.name, current, s


def exercise_refs(folder: Path = NBS / "exercises") -> dict[str, set[str]]:
    """Every exercise id with the exercises it builds on: the ids its text mentions ("the envelope of mc.2", "your
    result of mcmc.6"), except one later in the same problem set (a pointer ahead: "you need it in mc.3") and those of
    `EXERCISE_NOT_NEEDED`."""
    out, order = {}, {}
    for name, current, s in exercise_markdown(folder):
        if current not in out:
            out[current], order[current] = set(), (name, len(order))
        out[current] |= set(EX_MENTION.findall(s)) - {current}
    for e, refs in out.items():
        out[e] = {r for r in refs if r in order and not (order[r][0] == order[e][0] and order[r][1] > order[e][1])}
        out[e] -= EXERCISE_NOT_NEEDED.get(e, set())
    return out


def exercises(folder: Path = NBS / "exercises") -> dict[str, set[str]]:
    """Every exercise id of the problem sets (`## mcmc.3 · ...` headings) with the chapters it builds on: the problem
    set's chapter, the chapters its own text links to, those of `EXERCISE_EXTRA`, and those of every exercise it
    builds on (`exercise_refs`, followed back)."""
    out = {}
    for name, current, s in exercise_markdown(folder):
        out.setdefault(current, {name})
        out[current] |= set(CHAPTER_LINK.findall(s))
    for k, extra in EXERCISE_EXTRA.items():
        if k in out:
            out[k] |= extra
    refs = exercise_refs(folder)
    for e in out:                                   # inherit the chapters of the exercises it builds on
        seen, todo = set(), list(refs.get(e, ()))
        while todo:
            r = todo.pop()
            if r not in seen:
                seen.add(r)
                todo += refs.get(r, [])
        for r in seen:
            out[e] = out[e] | out.get(r, set())
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


def track_problems(track: Track, chapters: dict, exercise_needs: dict, exercise_refs: dict | None = None) -> list[str]:
    """What is wrong with a track:

    - an assumed chapter whose prerequisites (followed back) are not all assumed too;
    - a chapter before its prerequisites, which must come in the same or an earlier session, or be assumed;
    - a soft dependency (a chapter used ahead, or by one section) that is neither assumed nor read by the last
      session reading the chapter, so that the chapter is finished before the chapters it uses are read;
    - an unknown exercise id, an exercise set before the chapters it builds on (`exercises`), or before an exercise
      it builds on (`exercise_refs`), which must be set in the same or an earlier session."""
    problems, assumed = [], {f for _, f in track.assumes}
    for f in sorted(assumed):
        if f in chapters:
            for p in sorted(ancestors(chapters, f) - assumed):
                problems.append(f"{track.title}: assumes {f}, which needs {p}, not assumed")
    everything = assumed | {f for _, links, _ in track.sessions for _, f in links}
    last = {f: k for k, links, _ in track.sessions for _, f in links}        # the last session reading a chapter
    by_session, seen, set_ex = {}, set(assumed), set()
    for k, links, _ in track.sessions:
        by_session[k] = seen = seen | {f for _, f in links}
    for k, links, ids in track.sessions:
        seen = by_session[k]
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
                elif k == last[f] and p not in seen:
                    problems.append(f"{track.title}, session {k}: {f} uses {p} (ahead or in one section), "
                                    f"not read by session {k}, which finishes {f}")
        set_ex |= set(ids)
        for e in ids:
            if e not in exercise_needs:
                problems.append(f"{track.title}, session {k}: no exercise {e}")
                continue
            if missing := sorted(exercise_needs[e] - seen):
                problems.append(f"{track.title}, session {k}: exercise {e} builds on {missing}, not read by then")
            for r in sorted((exercise_refs or {}).get(e, set()) - set_ex):
                problems.append(f"{track.title}, session {k}: exercise {e} builds on exercise {r}, "
                                "not set in this or an earlier session")
    return problems
