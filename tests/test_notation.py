"""The book-wide notation page nbs/notation.ipynb and the chapters' notation tables (issue 30, item 6 "One notation").

Fast: nothing is run, the notebooks are read as JSON. The parsing lives once, in tools/notation.py."""
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / "nbs"
PAGE = NBS / "notation.ipynb"
sys.path.insert(0, str(ROOT / "tools"))
import notation as nt  # noqa: E402
import chapter_graph as cg  # noqa: E402

# Letters that one chapter's notation tables give two meanings today, as (notebook, symbol key): none since chapter 2
# renamed the letters of its worked models (Gamma Ga(kappa, lambda), weight prior N(zeta, 1/tau)).
KNOWN_CLASHES: set = set()


def _cells():
    return json.loads(PAGE.read_text(encoding="utf-8"))["cells"]


def test_page_exists_is_prose_and_has_a_title():
    cells = _cells()
    assert cells and all(c["cell_type"] == "markdown" for c in cells), "the notation page is prose only"
    lines = [l for l in nt._src(cells[0]).splitlines() if l.strip()]
    assert lines[0] == "# Notation and glossary"
    assert lines[1].startswith("> ") and len(lines[1]) > 10
    text = "\n".join(nt._src(c) for c in cells)
    assert re.search(r"^## Glossary", text, re.M) and re.search(r"^## Notation", text, re.M)


def test_page_is_in_the_sidebar_after_how_to_use():
    hrefs = [h for h, _ in cg.sidebar_labels(ROOT / "_quarto.yml")]
    assert "notation.ipynb" in hrefs
    assert hrefs.index("notation.ipynb") == hrefs.index("how_to_use.ipynb") + 1, hrefs[:5]
    from build_site import PROSE_PAGES
    assert "notation.ipynb" in PROSE_PAGES, "a page with no code gets no Colab link"


def test_every_book_wide_symbol_links_to_an_existing_chapter():
    rows = nt.book_rows(PAGE)
    assert len(rows) >= 50, f"only {len(rows)} rows in the book-wide table"
    bad = []
    for r in rows:
        targets = [t.split("#")[0] for _, t in r.links]
        if not targets:
            bad.append(f"{r.display}: no link")
        for t in targets:
            if not re.fullmatch(r"\d\w*\.ipynb", t) or not (NBS / t).exists():
                bad.append(f"{r.display}: link to {t}, not an existing chapter notebook")
    assert not bad, "\n".join(bad)


def test_glossary_terms_link_to_existing_chapters():
    text = "\n".join(nt._src(c) for c in _cells())
    glossary = text.split("## Glossary", 1)[1]
    entries = re.findall(r"^\*\*(.+?)\*\* \(\[[^\]]+\]\(([^)]+)\)\)", glossary, re.M)
    assert len(entries) >= 30, len(entries)
    terms = " ".join(t for t, _ in entries).lower()
    for want in ("elbo", "r-hat", "effective sample size", "importance weight", "inverse temperature", "particle",
                 "proposal", "resampling", "amortisation", "importance sampling", "particle filter", "gibbs"):
        assert want in terms, f"no glossary entry for {want}"
    assert not [f for _, f in entries if not (NBS / f.split("#")[0]).exists()]
    # each links the section that defines it (test_site checks the anchors exist): search ranks that section first
    assert not [t for t, f in entries if "#" not in f], "glossary entries linking a chapter, not its section"
    assert [t.lower() for t, _ in entries] == sorted(t.lower() for t, _ in entries), "glossary not in alphabetical order"


def test_planted_table_is_parsed(tmp_path):
    "A notation table under an ATX heading and one under a bold paragraph, with the cases the chapters use."
    md1 = ("## Something\n\n### Notation {.unnumbered}\n\nText.\n\n| symbol | meaning here | code |\n|---|---|---|\n"
           "| $\\pi$, $\\tilde\\pi$, $Z$ | target density, its unnormalised version, $Z=\\int\\tilde\\pi$ | `Target` |\n"
           "| $q(x'\\mid x)$ | proposal density, with a pipe in code `a|b` | |\n"
           "| $t = 0, \\dots, T$ | step | `t` |\n| $\\alpha_0,\\beta_0$ | shape and rate | |\n")
    md2 = "| symbol | meaning |\n|---|---|\n| $\\hat Z_T$ | estimate |\n"          # still under ### Notation
    md3 = "## Other\n\n| symbol | meaning |\n|---|---|\n| $x$ | not a notation table |\n"
    md4 = ("**Notation.**\n\n| symbol | here | elsewhere in the chapter |\n|---|---|---|\n"
           "| $\\mu,\\tau$ | mean and precision | $\\mu$: moments of a tilted distribution; $\\tilde\\tau_i$: site precisions |\n")
    md5 = "| symbol | meaning |\n|---|---|\n| $y$ | outside the bold paragraph's cell |\n"
    nb = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": s} for s in (md1, md2, md3, md4, md5)],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    p = tmp_path / "09_x.ipynb"
    p.write_text(json.dumps(nb))
    tables = nt.notation_tables(p)
    assert [t.cell for t in tables] == [0, 1, 3]
    es = [e for t in tables for e in nt.table_entries(t)]
    got = {(e.symbol, e.meaning, e.kind) for e in es}
    assert (r"\pi", "target density", "main") in got and (r"\tilde\pi", "its unnormalised version", "main") in got
    assert ("Z", r"$Z=\int\tilde\pi$", "main") in got
    assert ("q", "proposal density, with a pipe in code `a|b`", "main") in got
    assert ("t", "step", "main") in got and not any(e.symbol in (r"\dots", "T") for e in es)
    assert {(r"\alpha_0", "shape and rate"), (r"\beta_0", "shape and rate")} <= {(e.symbol, e.meaning) for e in es}
    assert (r"\hatZ_T", "estimate", "main") in got
    assert (r"\mu", "moments of a tilted distribution", "elsewhere") in got
    assert (r"\tilde\tau_i", "site precisions", "elsewhere") in got
    assert not any(e.symbol in ("x", "y") for e in es)
    # mu has two meanings: a clash; an identical second row is not
    assert set(nt.clashes(es)) == {r"\mu"}
    assert nt.symbol_key(r"\hat{Z}_T") == nt.symbol_key(r"\hat Z_T") and nt.symbol_key(r"L(\theta)") == "L"


def test_extractor_finds_the_chapters_tables():
    "The chapters that keep a notation table (2, 4, 5, 5c) are found, with symbols from each."
    entries = nt.chapter_entries(NBS)
    have = {nb for nb, es in entries.items() if es}
    assert {"02_ep.ipynb", "04_mcmc.ipynb", "05_smc.ipynb", "05c_particle_mcmc.ipynb"} <= have, have
    keys = {nb: {e.symbol for e in es} for nb, es in entries.items()}
    assert {r"\tau", "M", r"\epsilon"} <= keys["04_mcmc.ipynb"]
    assert {"N", r"\beta_t", "G_t"} <= keys["05_smc.ipynb"]


def test_comparison_with_the_book_wide_table():
    "(b) No chapter meaning is plainly different from every book-wide meaning of its symbol; a planted one is caught."
    entries, rows = nt.chapter_entries(NBS), nt.book_rows(PAGE)
    different = [m for m in nt.compare_with_book(entries, rows) if m.kind == "different"]
    assert not different, "\n".join(f"{m.entry.notebook} ${m.entry.display}$: {m.entry.meaning} | book: {m.book}"
                                    for m in different)
    planted = {"09_x.ipynb": [nt.Entry(r"\tau", r"\tau", "number of lighthouses", "09_x.ipynb", 0)]}
    assert [m.kind for m in nt.compare_with_book(planted, rows)] == ["different"]


def test_no_new_clashes_within_a_chapter():
    "No letter gets two meanings in one chapter's notation tables, beyond the known ones below."
    found = set(nt.all_clashes(NBS))
    assert found <= KNOWN_CLASHES, f"new clashes: {sorted(found - KNOWN_CLASHES)}"


def test_no_symbol_has_two_meanings_within_a_chapter():
    found = nt.all_clashes(NBS)
    assert not found, "\n".join(f"{nb} ${v[0].display}$: " + " | ".join(e.meaning for e in v) for (nb, _), v in found.items())


@pytest.mark.parametrize("nb", sorted(p.name for p in (Path(__file__).resolve().parents[1] / "nbs").glob("[0-9]*.ipynb")))
def test_every_chapter_links_the_notation_page(nb):
    "Each chapter's title cell links the book-wide notation page (issue 30, item 6)."
    cells = json.loads((Path(__file__).resolve().parents[1] / "nbs" / nb).read_text(encoding="utf-8"))["cells"]
    title = next("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    assert "](notation.ipynb)" in title, f"{nb}: the title cell does not link notation.ipynb"


def test_one_letter_for_the_inverse_temperature():
    "The tempering exponent is beta_t wherever the book tempers (3b AIS, 5 SMC and its problems), never lambda_t."
    root = Path(__file__).resolve().parents[1] / "nbs"
    for nb in ("03b_ais.ipynb", "05_smc.ipynb", "05d_smc_samplers.ipynb", "exercises/05_smc.ipynb", "solutions/05_smc.ipynb"):
        text = "\n".join("".join(c["source"]) for c in json.loads((root / nb).read_text(encoding="utf-8"))["cells"])
        assert not re.search(r"\\lambda_\{?[t\-0T]", text), f"{nb}: the inverse temperature is written lambda"
        assert not re.search(r"likelihood\$\^\\lambda|\)\^\{?\\lambda", text), f"{nb}: a likelihood raised to lambda"
