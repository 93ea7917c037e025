"""The reader's path: every chapter declares its prerequisites in one parseable line, the links and labels agree with
the sidebar, the graph is acyclic, the figure of nbs/how_to_use.ipynb draws exactly the declared edges, and the
course tracks of that page are closed under prerequisites and name existing exercises. Fast (no notebook is run).

The parsing lives once, in tools/chapter_graph.py, which the page imports too."""
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / "nbs"
sys.path.insert(0, str(ROOT / "tools"))
import chapter_graph as cg  # noqa: E402


@pytest.fixture(scope="module")
def chapters():
    return cg.read_chapters(NBS)


@pytest.fixture(scope="module")
def labels():
    return dict(cg.sidebar_labels(ROOT / "_quarto.yml"))


def test_every_chapter_has_one_well_formed_line():
    "Exactly one 'Before this chapter' line per chapter, in its first markdown cell, right after the description."
    names = sorted(p.name for p in NBS.glob("0*.ipynb"))
    assert names, "no chapter notebooks"
    bad = []
    for name in names:
        text = cg.first_markdown(NBS / name)
        lines = text.splitlines()
        found = cg.prerequisite_lines(text)
        if len(found) != 1:
            bad.append(f"{name}: {len(found)} declaration lines")
            continue
        try:
            cg.parse_line(found[0])
        except ValueError as e:
            bad.append(f"{name}: {e}")
        k = lines.index(found[0])
        before = [l for l in lines[:k] if l.strip()]
        if not before or not before[-1].startswith("> "):
            bad.append(f"{name}: the declaration does not follow the `> description` line")
        # nowhere else in the notebook
        cells = json.loads((NBS / name).read_text(encoding="utf-8"))["cells"]
        others = sum(len(cg.prerequisite_lines(cg._src(c))) for c in cells) - 1
        if others:
            bad.append(f"{name}: {others} more declaration line(s) outside the title cell")
    assert not bad, "\n".join(bad)
    assert set(cg.read_chapters(NBS)) == set(names)


def test_parse_line_rejects_malformed_lines():
    good = "**Before this chapter:** [0 Foundations](00_core.ipynb), [1 X](01_vi.ipynb) · **Core**"
    assert cg.parse_line(good) == ([("0 Foundations", "00_core.ipynb"), ("1 X", "01_vi.ipynb")], "Core", [])
    assert cg.parse_line("**Before this chapter:** none · **Optional** · uses [7 B](07_bnn.ipynb) ahead")[2] == [("7 B", "07_bnn.ipynb")]
    for bad in ("**Before this chapter:** none", "**Before this chapter:** [0 F](00_core.ipynb) · Core",
                "**Before this chapter:** [0 F](00_core.ipynb); [1 X](01_vi.ipynb) · **Core**",
                "**Before this chapter:** nothing · **Core**", "**Before this chapter:** none · **Main**",
                "**Before this chapter:** [0 F](00_core.md) · **Core**"):
        with pytest.raises(ValueError):
            cg.parse_line(bad)


def test_links_exist_and_labels_match_the_sidebar(chapters, labels):
    "Every link of a declaration (prerequisite or note) names an existing chapter with its sidebar label."
    bad = []
    for c in chapters.values():
        for label, f in c.prereqs + c.soft:
            if not (NBS / f).exists():
                bad.append(f"{c.name}: link to missing {f}")
            elif labels.get(f) != label:
                bad.append(f"{c.name}: [{label}]({f}) but the sidebar says {labels.get(f)!r}")
        if c.name in {f for _, f in c.prereqs}:
            bad.append(f"{c.name} lists itself")
        if len({f for _, f in c.prereqs}) != len(c.prereqs):
            bad.append(f"{c.name}: a prerequisite listed twice")
    assert not bad, "\n".join(bad)


def test_main_chapters_are_core(chapters):
    "The main chapters 0-8 are core; a core chapter's prerequisites are core (the main line needs no optional page)."
    for name, c in chapters.items():
        if re.fullmatch(r"0\d_[a-z]\w*\.ipynb", name) and not re.match(r"0\d[a-z]_", name):
            assert c.core, f"{name} is a main chapter but marked {c.mark}"
        if c.core:
            opt = [f for _, f in c.prereqs if not chapters[f].core]
            assert not opt, f"core chapter {name} needs optional {opt}"


def test_graph_is_acyclic(chapters):
    assert cg.find_cycle(chapters, cg.edges(chapters)) is None, cg.find_cycle(chapters, cg.edges(chapters))
    # and the checker does find a cycle when there is one
    assert cg.find_cycle(["a", "b", "c"], {("a", "b"), ("b", "c"), ("c", "a")}) is not None


def test_soft_links_point_elsewhere(chapters):
    "A note's link is not also a prerequisite (then it is one), and a chapter used 'ahead' comes later in the book."
    for c in chapters.values():
        both = {f for _, f in c.soft} & {f for _, f in c.prereqs}
        assert not both, f"{c.name}: {both} both a prerequisite and in the note"
        note = c.line.split("**" + c.mark + "**", 1)[1]
        for m in re.finditer(r"\]\(([^)]+)\) ahead", note):
            assert m.group(1) > c.name, f"{c.name} says it uses {m.group(1)} ahead, but that comes earlier"


def test_figure_draws_the_declared_edges(chapters, labels):
    "The figure of the page has one arrow per declared prerequisite and one dashed arrow per note link, no more."
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = cg.fig_chapter_graph(chapters, labels)
    try:
        hard, soft = cg.drawn_edges(fig)
        assert hard == cg.edges(chapters), (hard ^ cg.edges(chapters))
        assert soft == cg.soft_edges(chapters), (soft ^ cg.soft_edges(chapters))
        texts = [t.get_text().replace("\n", " ") for t in fig.axes[0].texts]
        assert len(texts) == len(chapters), "one box per chapter"
    finally:
        plt.close(fig)


def test_figure_arrows_enter_no_other_box(chapters, labels):
    """Geometry, not gids: every arrow's drawn path (body and head, in data coordinates) enters no box but its two ends,
    so no arrow can be read as two arrows through an unrelated chapter."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig = cg.fig_chapter_graph(chapters, labels)
    try:
        ax = fig.axes[0]
        fig.canvas.draw()
        inv = ax.transData.inverted()
        boxes = {p.get_gid()[4:]: p.get_extents().transformed(inv) for p in ax.patches
                 if (p.get_gid() or "").startswith("box:")}
        assert set(boxes) == set(chapters)
        bad, n_arrows = [], 0
        for p in ax.patches:
            gid = p.get_gid() or ""
            if "->" not in gid:
                continue
            n_arrows += 1
            a, b = gid.removeprefix("soft:").split("->")
            paths, _ = p._get_path_in_displaycoord()
            for path in paths:
                for poly in path.to_polygons(closed_only=False):
                    q = inv.transform(poly)
                    pts = np.concatenate([np.linspace(q[i], q[i + 1], 50) for i in range(len(q) - 1)] + [q])
                    for n, bb in boxes.items():
                        e = 0.005                           # a line may touch a box edge, not enter it
                        if n not in (a, b) and ((pts[:, 0] > bb.x0 + e) & (pts[:, 0] < bb.x1 - e)
                                                & (pts[:, 1] > bb.y0 + e) & (pts[:, 1] < bb.y1 - e)).any():
                            bad.append(f"{gid} passes through the box of {n}")
        assert n_arrows == len(cg.edges(chapters)) + len(cg.soft_edges(chapters))
        assert not bad, "\n".join(sorted(set(bad)))
    finally:
        plt.close(fig)


def test_page_draws_the_figure_from_the_parser():
    "The page's figure cell imports the same parser (not a copy) and hides its code."
    cells = json.loads((NBS / "how_to_use.ipynb").read_text(encoding="utf-8"))["cells"]
    code = [cg._src(c) for c in cells if c["cell_type"] == "code"]
    fig_cells = [s for s in code if "fig_chapter_graph" in s]
    assert len(fig_cells) == 1
    assert "from chapter_graph import" in fig_cells[0] and "read_chapters" in fig_cells[0]
    assert re.search(r"^#\|\s*(echo:\s*false|code-fold:\s*true)", fig_cells[0], re.M)
    assert not any("default_exp" in s for s in code), "the page is a plain page, not a module"


def test_page_is_in_the_sidebar_after_the_landing_page():
    hrefs = [h for h, _ in cg.sidebar_labels(ROOT / "_quarto.yml")]
    assert hrefs[:2] == ["index.ipynb", "how_to_use.ipynb"], hrefs[:3]


def test_three_tracks_closed_under_prerequisites(chapters):
    tracks = cg.read_tracks(NBS / "how_to_use.ipynb")
    assert len(tracks) == 3, [t.title for t in tracks]
    needs, refs = cg.exercises(NBS / "exercises"), cg.exercise_refs(NBS / "exercises")
    problems = [p for t in tracks for p in cg.track_problems(t, chapters, needs, refs)]
    assert not problems, "\n".join(problems)
    for t in tracks:
        assert t.sessions, f"{t.title} has no sessions"
        assert [k for k, _, _ in t.sessions] == list(range(1, len(t.sessions) + 1)), f"{t.title}: sessions not 1..n"
        assert all(links and ids for _, links, ids in t.sessions), f"{t.title}: a session without chapters or exercises"


def test_track_checker_catches_mistakes(chapters):
    "The closure check fails on a chapter before its prerequisite, an unknown exercise, and an exercise set too early."
    needs = cg.exercises(NBS / "exercises")
    lab = {f: "x" for f in chapters}
    t = cg.Track("T", [], [(1, [(lab["04_mcmc.ipynb"], "04_mcmc.ipynb")], ["mcmc.99", "mcmc.8"])])
    found = "\n".join(cg.track_problems(t, chapters, needs))
    assert "needs 03_montecarlo.ipynb" in found and "no exercise mcmc.99" in found and "exercise mcmc.8" in found
    t = cg.Track("T", [("x", "00_core.ipynb")], [(1, [("x", "03_montecarlo.ipynb"), ("x", "04_mcmc.ipynb"),
                                                     ("x", "04b_diagnostics.ipynb")], ["mcmc.8"])])
    assert cg.track_problems(t, chapters, needs) == []


def test_track_checker_catches_unmet_assumptions_soft_uses_and_exercise_references(chapters):
    """The assumed chapters' prerequisites must be assumed too; a chapter used ahead or by one section must be read by
    the session that finishes the chapter; an exercise that builds on another needs it set no later."""
    import copy

    needs, refs = cg.exercises(NBS / "exercises"), cg.exercise_refs(NBS / "exercises")
    x = lambda *fs: [("x", f) for f in fs]
    # assumes chapter 5 but none of 3, 4, 4b that it needs
    t = cg.Track("T", x("00_core.ipynb", "05_smc.ipynb"), [(1, x("05b_gaussian_filters.ipynb"), ["smc.3"])])
    found = "\n".join(cg.track_problems(t, chapters, needs, refs))
    for p in ("03_montecarlo", "04_mcmc.ipynb", "04b_diagnostics"):
        assert f"assumes 05_smc.ipynb, which needs {p}" in found, found
    t = cg.Track("T", x("00_core.ipynb", "03_montecarlo.ipynb", "04_mcmc.ipynb", "04b_diagnostics.ipynb",
                        "05_smc.ipynb"), [(1, x("05b_gaussian_filters.ipynb"), ["smc.3"])])
    assert cg.track_problems(t, chapters, needs, refs) == []
    # one section of chapter 7 uses 2b, read only in a later session
    ch = copy.deepcopy(chapters)
    if ("2b Probabilistic backpropagation", "02b_pbp.ipynb") not in ch["07_bnn.ipynb"].soft:
        ch["07_bnn.ipynb"].soft.append(("2b Probabilistic backpropagation", "02b_pbp.ipynb"))
    base = x("00_core.ipynb", "03_montecarlo.ipynb", "04_mcmc.ipynb", "04b_diagnostics.ipynb")
    late = cg.Track("T", base, [(1, x("01_vi.ipynb", "04d_sgmcmc.ipynb", "07_bnn.ipynb"), ["bnn.1"]),
                                (2, x("02_ep.ipynb", "02b_pbp.ipynb"), ["ep.9"])])
    assert any("07_bnn.ipynb uses 02b_pbp.ipynb" in p for p in cg.track_problems(late, ch, needs, refs))
    ok = cg.Track("T", base, [(1, x("01_vi.ipynb", "04d_sgmcmc.ipynb", "07_bnn.ipynb"), ["bnn.1"]),
                              (2, x("02_ep.ipynb", "02b_pbp.ipynb", "07_bnn.ipynb"), ["ep.9"])])
    assert cg.track_problems(ok, ch, needs, refs) == []
    # mc.3 builds on mc.2; vae.6 on vae.4, and so on the chapter vae.4 needs
    t = cg.Track("T", x("00_core.ipynb"), [(1, x("03_montecarlo.ipynb"), ["mc.3"]), (2, x("03_montecarlo.ipynb"), ["mc.2"])])
    assert any("exercise mc.3 builds on exercise mc.2" in p for p in cg.track_problems(t, chapters, needs, refs))
    t = cg.Track("T", x("00_core.ipynb"), [(1, x("03_montecarlo.ipynb"), ["mc.2", "mc.3"])])
    assert cg.track_problems(t, chapters, needs, refs) == []
    assert "08d_vae_flows.ipynb" in needs["vae.6"] and "08d_vae_flows.ipynb" in needs["vae.14"]


def test_exercise_references():
    """An exercise builds on the exercises its text mentions, except a pointer ahead in the same problem set and the
    mentions of `EXERCISE_NOT_NEEDED`, each of which is still in the exercise's text."""
    refs = cg.exercise_refs(NBS / "exercises")
    assert refs["mc.3"] == {"mc.2"} and "mc.3" not in refs["mc.2"]          # mc.2 says "you need it in mc.3"
    assert refs["vae.6"] == {"vae.4"} and refs["vae.4"] == {"vae.3"} and refs["mcmc.7"] == {"mcmc.6"}
    text = {}
    for p in sorted((NBS / "exercises").glob("*.ipynb")):
        for c in json.loads(p.read_text(encoding="utf-8"))["cells"]:
            if c["cell_type"] == "markdown" and (m := cg.EX_ID.match(cg._src(c))):
                text[m.group(1)] = cg._src(c)
    for e, skip in cg.EXERCISE_NOT_NEEDED.items():
        assert all(s in text[e] for s in skip), f"{e} no longer mentions {skip}: drop it from EXERCISE_NOT_NEEDED"
        assert not skip & refs[e]


def test_exercise_ids_and_their_chapters():
    "Ids are unique per heading; each exercise builds on existing chapters; the extras are stated in the problem sets."
    needs = cg.exercises(NBS / "exercises")
    assert len(needs) >= 90 and "mcmc.3" in needs
    for e, fs in needs.items():
        assert fs and all((NBS / f).exists() for f in fs), (e, fs)
    for e, extra in cg.EXERCISE_EXTRA.items():
        prefix = e.split(".")[0]
        book = {"mc": "03_montecarlo", "smc": "05_smc", "bnn": "07_bnn"}[prefix]
        intro = cg.first_markdown(NBS / "exercises" / f"{book}.ipynb")
        assert e in intro and all(f"../{f}" in intro for f in extra), f"{e}: the problem set's intro does not say {extra}"


def _page_title(path):
    "The text of a notebook's first `# ` heading."
    for c in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        s = cg._src(c)
        if c["cell_type"] == "markdown" and s.startswith("# "):
            return s.splitlines()[0][2:].strip()


def test_one_label_per_chapter():
    "A chapter's sidebar label is its number and its page title; a problem or solution set's label is its title."
    bad = []
    for href, label in cg.sidebar_labels(ROOT / "_quarto.yml"):
        title = _page_title(NBS / href)
        if re.match(r"^\d+[a-z]? ", label):
            if label.split(" ", 1)[1] != title:
                bad.append(f"{href}: sidebar {label!r}, title {title!r}")
        elif re.match(r"^(Problems|Solutions) \d+: ", label) and label != title:
            bad.append(f"{href}: sidebar {label!r}, title {title!r}")
    assert not bad, "\n".join(bad)
