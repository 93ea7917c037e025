"""The offline website: build it once into a temporary folder and check it the way a reader would use it.

The build is `tools/build_site.py --fallback` (nbdev's processors + smalldocs, no Quarto) executing only the
fast notebooks (the full notebooks are executed by nbval in the notebook tests); every notebook in nbs/ still
gets a page. Nothing is written to the repository: output and staging go to pytest's tmp dirs, and the build
does not re-export the package (tests/test_nbdev_sync.py checks that the package is in sync).
"""
import copy
import html
import json
import posixpath
import re
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import unquote, urlsplit

import bs4  # beautifulsoup4: in the dev extra (it also comes with jupyterlab's nbconvert)
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / "nbs"
TOOLS = ROOT / "tools"
EXECUTED = ["00_core.ipynb"]  # executed for the site test (its figures are checked); the others are shown unexecuted
CORE = "00_core.ipynb"


def notebooks():
    "Every notebook nbdev documents: *.ipynb under nbs/, skipping files and folders that start with _ or ."
    return sorted(p.relative_to(NBS).as_posix() for p in NBS.rglob("*.ipynb")
                  if not any(part.startswith(("_", ".")) for part in p.relative_to(NBS).parts))


def page_of(nb):
    "nbdev's page name: numeric prefix dropped, lower case (04_mcmc.ipynb -> mcmc.html)."
    d, _, name = nb.rpartition("/")
    name = re.sub(r"^\d+[a-zA-Z0-9]*_", "", name.lower())
    return (d + "/" if d else "") + name[: -len(".ipynb")] + ".html"


def settings():
    import configparser

    cp = configparser.ConfigParser()
    cp.read(ROOT / "settings.ini")
    return cp["DEFAULT"]


def _outputs(nb):
    "How many stored outputs a notebook in nbs/ has (committed notebooks have none)."
    cells = json.loads((NBS / nb).read_text(encoding="utf-8"))["cells"]
    return sum(len(c.get("outputs", [])) for c in cells if c["cell_type"] == "code")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("site")
    out, build = tmp / "_docs", tmp / "_build"
    nbs = notebooks()
    assert nbs, "no notebooks in nbs/"
    executed = [nb for nb in EXECUTED if (NBS / nb).exists()]
    files_before = {p.relative_to(NBS) for p in NBS.rglob("*")}
    cmd = [sys.executable, str(TOOLS / "build_site.py"), "--fallback", "--no-export", "--exec-glob", "|".join(EXECUTED),
           "--out", str(out), "--build-dir", str(build)]
    t = time.time()
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    log = r.stdout + r.stderr
    assert r.returncode == 0, f"site build failed:\n{log[-5000:]}"
    print(f"site build: {time.time() - t:.1f} s")
    # the build executes into a staging copy: nbs/ gets no outputs and no new files (other people may be
    # editing notebooks while this runs, so contents are not compared)
    assert not [nb for nb in executed if _outputs(nb)], "the site build wrote outputs into nbs/"
    new = {p.relative_to(NBS) for p in NBS.rglob("*")} - files_before
    assert not [p for p in new if p.suffix != ".ipynb"], f"the site build wrote into nbs/: {sorted(new)}"
    pages = {}
    for f in sorted(out.rglob("*.html")):
        pages[f.relative_to(out).as_posix()] = bs4.BeautifulSoup(f.read_text(encoding="utf-8"), "html.parser")
    return SimpleNamespace(out=out, log=log, nbs=nbs, pages=pages)


def content_pages(site):
    return {page_of(nb): site.pages[page_of(nb)] for nb in site.nbs if page_of(nb) in site.pages}


# ------------------------------------------------------------------------------------------ pages
def test_one_page_per_notebook(site):
    missing = [f"{nb} -> {page_of(nb)}" for nb in site.nbs if page_of(nb) not in site.pages]
    assert not missing, f"notebooks without a page: {missing}"
    for name, soup in content_pages(site).items():
        assert soup.find("main") is not None and soup.find("h1") is not None, f"{name} has no main content or title"
    assert "index.html" in site.pages


def test_sidebar_in_quarto_order(site):
    cfg = yaml.safe_load((ROOT / "_quarto.yml").read_text())
    sys.path.insert(0, str(TOOLS))
    from build_site import sidebar_order   # sections (problem sets, solutions) flattened in order

    listed = sidebar_order(cfg)
    expected = [page_of(nb) for nb in listed if nb and (NBS / nb).exists()]
    assert expected, "no sidebar entry of _quarto.yml exists in nbs/"
    for name, soup in content_pages(site).items():
        bar = soup.find(id="quarto-sidebar")
        assert bar is not None, f"{name} has no sidebar"
        base = posixpath.dirname(name)
        hrefs = [posixpath.normpath(posixpath.join(base, a["href"])) for a in bar.select("a.sidebar-link") if a.get("href")]
        assert hrefs == expected, f"{name}: sidebar {hrefs} != _quarto.yml order {expected}"


def test_no_directives_show_doc_or_widget_reprs(site):
    for name, soup in site.pages.items():
        for pre in soup.find_all("pre"):
            text = pre.get_text()
            assert not re.search(r"^\s*#\s*\|", text, re.M), f"{name}: raw directive in a code block:\n{text[:300]}"
            assert "show_doc(" not in text, f"{name}: show_doc call shown:\n{text[:300]}"
        # widget reprs are outputs: look at what the cells printed or displayed, not at the code that built them
        shown = " ".join(o.get_text() for o in soup.select(".cell-output"))
        for bad in ("interactive(children=", "VBox(children=", "HBox(children=", "IntSlider(value=", "FloatSlider(value=", "Output()"):
            assert bad not in shown, f"{name}: widget text repr {bad!r} in an output"


def test_core_page_has_stored_figures(site):
    assert (NBS / CORE).exists(), f"nbs/{CORE} is missing"
    soup = site.pages[page_of(CORE)]
    imgs = [i for i in soup.select(".cell-output img") if i.get("src")]
    svgs = soup.select(".cell-output svg")
    assert imgs or svgs, f"{page_of(CORE)} shows no figure from the executed notebook"
    for img in imgs:
        src = img["src"]
        if src.startswith("data:"):
            assert re.match(r"data:image/(png|jpeg|gif|svg\+xml);base64,[A-Za-z0-9+/=]{100,}", src), src[:80]
        else:
            assert (site.out / posixpath.dirname(page_of(CORE)) / unquote(src)).is_file(), f"missing image file {src}"


def _local(url):
    if not url or url.startswith(("#", "data:", "mailto:", "javascript:")) or url == "#":
        return False
    return not urlsplit(url).scheme and not url.startswith("//")


def test_internal_links_resolve(site):
    ids = {name: {t["id"] for t in soup.find_all(id=True)} for name, soup in site.pages.items()}
    broken = []
    for name, soup in site.pages.items():
        base = posixpath.dirname(name)
        for tag, attr in (("a", "href"), ("img", "src"), ("link", "href"), ("script", "src")):
            for el in soup.find_all(tag):
                url = el.get(attr)
                if not url:
                    continue
                if url.startswith("#") and len(url) > 1:
                    if unquote(url[1:]) not in ids[name]:
                        broken.append(f"{name}: {url}")
                    continue
                if not _local(url):
                    continue
                parts = urlsplit(url)
                target = posixpath.normpath(posixpath.join(base, unquote(parts.path)))
                f = site.out / target
                if f.is_dir():
                    target, f = posixpath.join(target, "index.html"), f / "index.html"
                if not f.is_file():
                    broken.append(f"{name}: {url}")
                elif parts.fragment and target in ids and unquote(parts.fragment) not in ids[target]:
                    broken.append(f"{name}: {url} (no #{parts.fragment} in {target})")
    assert not broken, "broken internal links:\n" + "\n".join(broken)


def test_chapter_links_use_nbdev_page_names(site):
    "A markdown link to a notebook (e.g. `04_mcmc.ipynb`) must point at nbdev's page name (`mcmc.html`)."
    for name, soup in site.pages.items():
        for a in soup.find_all("a", href=True):
            if a.has_attr("download"):  # "Download .ipynb": the notebook itself, shipped beside the pages
                continue
            assert ".ipynb" not in urlsplit(a["href"]).path or urlsplit(a["href"]).scheme, f"{name}: link to a notebook {a['href']}"


# ------------------------------------------------------------------------------------------ citations, maths, search
def test_citations_resolved_with_reference_list(site):
    assert "unknown citation key" not in site.log, "unknown citation keys:\n" + "\n".join(
        l for l in site.log.splitlines() if "unknown citation key" in l)
    citing = 0
    for name, soup in content_pages(site).items():
        main = soup.find("main")
        for code in main.find_all(["pre", "code"]):
            code.decompose()
        assert not re.search(r"\[-?@[A-Za-z0-9_]", main.get_text()), f"{name}: an unresolved [@key] citation"
        cites = soup.select("a.citation")
        if not cites:
            continue
        citing += 1
        refs = soup.find(id="refs")
        assert refs is not None, f"{name} cites but has no reference list"
        entries = {d["id"] for d in refs.select(".csl-entry")}
        for a in cites:
            assert a["href"].lstrip("#") in entries, f"{name}: citation {a['href']} has no entry"
        assert all(len(d.get_text(strip=True)) > 20 for d in refs.select(".csl-entry"))
    assert citing, "no page cites anything: the book cites its sources with [@key]"


_TEX = re.compile(r"\\[()\[\]]|\$\\[a-zA-Z]|\\(frac|mathcal|mathbb|widehat|operatorname|alpha|beta|theta|sigma|mid|sum|log)\b")


_NOT_PROSE = {"pre", "code", "math", "script"}


def _prose(soup):
    """The page's text outside code and maths: `get_text(" ")` of <main> without those elements (read in place: a
    copy of the tree with them removed gives the same text, 20 times slower)."""
    return " ".join(s for s in soup.find("main").strings if not any(p.name in _NOT_PROSE for p in s.parents))


def test_maths_is_mathml_without_scripts(site):
    """Maths is MathML written at build time (pandoc): no maths script, no CDN, no raw TeX left in the prose, the
    tables of contents or the titles."""
    with_math = 0
    for name, soup in site.pages.items():
        for s in soup.find_all("script", src=True):
            assert not re.search(r"katex|mathjax", s["src"], re.I), f"{name} loads a maths script {s['src']}"
        assert not soup.find("link", href=re.compile(r"katex|mathjax", re.I)), f"{name} loads a maths stylesheet"
        spans = soup.select("span.math")
        with_math += bool(spans)
        for s in spans:
            assert s.find("math") is not None, f"{name}: maths not converted to MathML: {s.get_text()[:100]}"
        prose = _prose(soup)
        m = _TEX.search(prose)
        assert not m, f"{name}: raw TeX in the text: ...{prose[max(0, m.start() - 80):m.end() + 40]}..."
        for where in (soup.find(id="TOC"), soup.find(id="quarto-sidebar"), soup.find("title")):
            if where is not None:
                assert "\\" not in where.get_text(), f"{name}: TeX in {where.name}: {where.get_text()[:200]}"
    assert with_math, "no page has maths"


def test_search_entries_have_no_tex(site):
    "Search section titles, and the prose formulas in search texts, are Unicode text, not TeX."
    entries = json.loads((site.out / "search.json").read_text())
    for e in entries:
        assert "\\" not in e["section"] and "\\" not in e["title"], e["section"]
    texts = " ".join(e["text"] for e in entries)
    prose_tex = {a.get_text() for soup in site.pages.values() for p in soup.find("main").find_all("p")
                 for a in p.select("span.math.inline annotation")}
    # the text of every <pre> block, read from the files (other tests remove code blocks from the shared soups);
    # a regex, not a second parse of every page (the same text as BeautifulSoup's get_text(), 0.2 s against 28 s)
    code = " ".join(html.unescape(re.sub(r"<[^>]*>", "", block)) for f in site.out.rglob("*.html")
                    for block in re.findall(r"<pre\b[^>]*>(.*?)</pre>", f.read_text(encoding="utf-8"), re.S))
    # search texts include code, whose plot labels may hold the same TeX: only formulas absent from code count.
    # For a formula t without "$", f"${t}$" occurs in texts exactly when t is the text between two consecutive "$" of
    # texts: one split instead of one scan of the 2 MB text per formula (18 s)
    between = set(texts.split("$")[1:-1])
    leaked = [t for t in prose_tex if len(t) > 8 and (t in between if "$" not in t else f"${t}$" in texts)
              and t not in code]
    assert not leaked, f"TeX of prose formulas in search.json: {leaked[:5]}"


def test_search_ranks_prose_before_api(site):
    """API entries (show_doc headings) are titled "name (API reference)" and listed after every prose entry; no entry
    indexes code; the glossary's terms are keywords of the sections they link (the browser test checks the ranking)."""
    entries = json.loads((site.out / "search.json").read_text())
    api = {f"{name}#{h.get('id') or h.get('data-anchor-id')}" for name, soup in site.pages.items()
           for h in soup.select("h3.unlisted, section.unlisted")}
    kinds = [e["href"] in api for e in entries]
    assert any(kinds) and not all(kinds)
    assert kinds == sorted(kinds), "an API entry comes before a prose entry in search.json"
    assert all(e["section"].endswith(" (API reference)") and e["section"] != " (API reference)" for e in entries if e["href"] in api)
    code = [e["href"] for e in entries if re.search(r"\bimport numpy as np\b|default_rng\(SEED|\breturn np\.", e["text"])]
    assert not code, f"code in the search index: {code[:5]}"
    keyed = {e["href"]: e["keywords"] for e in entries if e.get("keywords")}
    assert keyed.get("vi.html#the-evidence-lower-bound", "").startswith("ELBO"), keyed.get("vi.html#the-evidence-lower-bound")
    assert "R-hat" in keyed.get("diagnostics.html#potential-scale-reduction-widehatr", "")
    assert '{ name: "keywords", weight: 4 }' in (site.out / "site_libs" / "smalldocs.js").read_text(encoding="utf-8")


def test_bibliography_maths_converted(site):
    "A title with maths in references.bib (Vehtari et al.'s R-hat) comes out as MathML in the reference list."
    refs = [d for soup in site.pages.values() for d in soup.select("#refs .csl-entry")]
    assert refs, "no reference list"
    for d in refs:
        assert d.find("math") is not None or "$" not in d.get_text(), f"maths left as TeX: {d.get_text()[:200]}"
        d = copy.copy(d)
        for m in d.find_all("math"):
            m.decompose()
        assert "$" not in d.get_text() and not _TEX.search(d.get_text()), d.get_text()[:200]


def test_search_index(site):
    f = site.out / "search.json"
    assert f.is_file(), "no search.json"
    entries = json.loads(f.read_text())
    assert isinstance(entries, list) and len(entries) >= len(site.nbs)
    for e in entries:
        assert (site.out / e["href"].partition("#")[0]).is_file(), e["href"]
    assert {e["href"].partition("#")[0] for e in entries} >= {page_of(nb) for nb in site.nbs}
    assert site.pages["index.html"].find(id="quarto-search") is not None, "no search box"
    assert (site.out / "site_libs" / "fuse" / "fuse.min.js").is_file()


# ------------------------------------------------------------------------------------------ API docs
def _exported():
    "{page: [(name, py file)]} for every public top-level function/class nbdev exported from an existing notebook."
    ns = {}
    exec((ROOT / "bayesnotes" / "_modidx.py").read_text(), ns)
    pages = {page_of(nb) for nb in notebooks()}
    out = {}
    for mod, d in ns["d"]["syms"].items():
        for full, (loc, py) in d.items():
            name, page = full[len(mod) + 1:], loc.partition("#")[0]
            if "." in name or name.startswith("_") or page not in pages:
                continue  # methods and private names get no show_doc; a module without its notebook is test_nbdev_sync's business
            out.setdefault(page, []).append((name, py))
    return out


def test_api_docs_with_source_links(site):
    "Each exported function/class has show_doc's heading, and beside it a source link to its file on git_url."
    cfg = settings()
    exported = _exported()
    assert exported, "the package exports nothing"
    problems = []
    for page, syms in exported.items():
        soup = site.pages[page]
        # show_doc's heading: its id is the lower-cased name (`Adam` and `adam` share it: adam, adam-1)
        heads = {}
        for h in soup.find_all(["h2", "h3", "h4"], id=True):
            heads.setdefault(h.get_text(strip=True), []).append(h)
        for name, py in syms:
            if name not in heads:
                problems.append(f"{page}: no API doc heading for {name}")
                continue
            # the line number is nbdev's; others may re-export while this runs, so the file is pinned, not the line
            want = re.escape(f"{cfg['git_url']}/blob/{cfg['branch']}/{py}") + r"#L\d+"
            links = [a["href"] for h in heads[name] for a in h.parent.find_all("a", href=True) if a.get_text(strip=True) == "source"]
            if not any(re.fullmatch(want, u) for u in links):
                problems.append(f"{page}: no source link to {py} beside the API doc of {name} (found {links})")
    assert not problems, "\n".join(problems)


def test_no_widget_javascript_and_launch_links(site):
    """Static pages carry no widget state or widget JavaScript (widgets become scrubbers or notes); each chapter links
    to Colab, Binder and a downloadable copy of its notebook (shipped with the site); the prose pages only to the copy."""
    sys.path.insert(0, str(TOOLS))
    from build_site import PROSE_PAGES
    for name, soup in site.pages.items():
        assert not soup.find("script", type=re.compile("jupyter.widget")), f"{name}: widget state or view on the page"
        assert not soup.find("script", src=re.compile(r"require|html-manager|embed-amd")), f"{name}: widget JavaScript"
    for nb in site.nbs:
        soup = site.pages[page_of(nb)]
        launch = soup.select_one(".bn-launch")
        if nb == "index.ipynb":
            assert launch is None
            continue
        assert launch is not None, f"{page_of(nb)} has no launch links"
        hrefs = [a["href"] for a in launch.find_all("a")]
        if nb in PROSE_PAGES:    # read, not run: only the download link
            assert not any("colab" in h or "mybinder" in h for h in hrefs), hrefs
            continue
        assert any(h.startswith("https://colab.research.google.com/github/") and h.endswith("/nbs/" + nb) for h in hrefs), hrefs
        assert any(h.startswith("https://mybinder.org/v2/gh/") for h in hrefs), hrefs
        dl = launch.find("a", download=True)
        assert dl is not None and dl["href"].endswith(nb), dl
        # a copy of the notebook (not compared byte for byte: others may be editing nbs/ while this runs)
        copy = site.out / posixpath.normpath(posixpath.join(posixpath.dirname(page_of(nb)), dl["href"]))
        assert json.loads(copy.read_text(encoding="utf-8"))["cells"], f"{dl['href']} is not a notebook"


# ------------------------------------------------------------------------------------------ citations unit tests
def _bib():
    sys.path.insert(0, str(TOOLS))
    from citations import Bibliography

    return Bibliography(NBS / "references.bib")


def test_citation_syntax():
    bib = _bib()
    key = next(iter(bib.data.entries))
    md = (f"A [@{key}, sec. 3] B [see @{key}; @{key}] C [-@{key}] D @{key}. Unknown [@nokey9999x]. "
          f"Mail a@{key}.org, code `@{key}`, maths $x@{key}$.\n```\n@{key}\n```\n")
    out, cited = bib.cite(md)
    assert cited.keys == [key] and cited.unknown == ["nokey9999x"]
    assert out.count(f'href="#ref-{key}"') == 5
    assert ", sec. 3</a>)" in out and f"(see <a" in out
    assert f"a@{key}.org" in out and f"`@{key}`" in out and f"$x@{key}$" in out and f"```\n@{key}\n```" in out
    assert "<strong>?nokey9999x</strong>" in out
    html = bib.references_html([key])
    assert html.count('class="csl-entry"') == 1 and f'id="ref-{key}"' in html


# ------------------------------------------------------------------------------------------ book pages
def test_sidebar_numbers_match_the_index():
    "The sidebar's chapter numbers (_quarto.yml `text:`) are the ones of the table of chapters on the landing page."
    cfg = yaml.safe_load((ROOT / "_quarto.yml").read_text())
    index = "".join("".join(c["source"]) for c in json.loads((NBS / "index.ipynb").read_text())["cells"]
                    if c["cell_type"] == "markdown")
    table = {href: num for num, href in re.findall(r"^\|\s*(\w+)\s*\|\s*\[[^\]]*\]\(([^)]+\.ipynb)\)", index, re.M)}
    assert table, "no table of chapters (| n | [title](notebook.ipynb) | ...) in nbs/index.ipynb"
    items = [c for c in cfg["website"]["sidebar"]["contents"] if isinstance(c, dict)]
    for it in items:
        if it.get("href") in table:
            assert str(it.get("text", "")).split()[0] == table[it["href"]], f"sidebar {it} vs index number {table[it['href']]}"
    assert {it.get("href") for it in items} >= set(table), f"chapters of the index missing from the sidebar: {set(table) - {it.get('href') for it in items}}"


def test_pages_are_numbered_with_prose_toc(site):
    """Sections are numbered, API names are not in the table of contents but in one 'API reference' section; the
    landing and contributing pages, which are no chapters, are not numbered."""
    soup = site.pages[page_of(CORE)]
    assert soup.select("h2 .header-section-number"), "sections are not numbered"
    for nb in ("index.ipynb", "contributing.ipynb"):
        assert not site.pages[page_of(nb)].select(".header-section-number"), f"{nb} has numbered sections"
    # every number is a number: a heading below the first section's level before the first section left smalldocs
    # (and Quarto: "0.1") without a counter, and the mcmc and smc pages showed empty numbers
    empty = {p: [h.parent.get_text(" ", strip=True)[:40] for h in s.select(".header-section-number") if not h.get_text(strip=True)]
             for p, s in site.pages.items()}
    assert not {p: e for p, e in empty.items() if e}, "headings with an empty section number"
    toc = soup.find(id="TOC")
    api_heads = soup.select("h3.unlisted")
    names = {h.get_text(strip=True) for h in api_heads}
    assert names, "show_doc headings are not .unlisted"
    api_ids = {h.get("data-anchor-id") or h.get("id") for h in api_heads}
    toc_text = [a.get_text(" ", strip=True) for a in toc.find_all("a")]
    assert not api_ids & {a["href"].lstrip("#") for a in toc.find_all("a", href=True)}, "API names in the table of contents"
    assert any(t.endswith("API reference") for t in toc_text)
    for name, page in content_pages(site).items():
        api = page.find(id="api-reference")
        if api is None:
            continue
        items = api.select("li")
        unlinked = [li.get_text()[:60] for li in items if not li.select_one("a[href^='#']")]
        assert not unlinked, f"{name}: API reference entries without a working link: {unlinked}"
    assert len(soup.find(id="api-reference").select("li")) == len(api_heads)


def test_previous_next_links(site):
    sys.path.insert(0, str(TOOLS))
    from build_site import sidebar_order   # sections (problem sets, solutions) flattened in order

    order = [page_of(nb) for nb in sidebar_order(yaml.safe_load((ROOT / "_quarto.yml").read_text())) if (NBS / nb).exists()]
    for k, name in enumerate(order):
        nav = site.pages[name].select_one("nav.page-navigation")
        assert nav is not None, f"{name} has no previous/next links"
        links = [posixpath.normpath(posixpath.join(posixpath.dirname(name), a["href"])) for a in nav.select("a.pagination-link")]
        want = ([order[k - 1]] if k else []) + ([order[k + 1]] if k + 1 < len(order) else [])
        assert links == want, f"{name}: previous/next {links} != {want}"


def test_self_contained(site):
    "No page, stylesheet or script loads anything from another host (the site works offline)."
    assert "from the network" not in site.log, [l for l in site.log.splitlines() if "from the network" in l]
    for f in site.out.rglob("*.css"):
        assert not re.search(r"@import\s+url\(['\"]?(https?:)?//", f.read_text(errors="replace")), f


def _tools(name):
    sys.path.insert(0, str(TOOLS))
    import importlib

    return importlib.import_module(name)


def test_tag_cells_on_a_small_notebook(tmp_path):
    "tools/tag_cells.py hides pure test cells, folds mixed ones, captions fig_* cells, drops 'Regenerate'; idempotent."
    import nbformat

    tag = _tools("tag_cells")
    M, C = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    nb = nbformat.v4.new_notebook(cells=[
        M("# T"),
        C('#| export\ndef fig_demo():\n    "A demo figure of $x^2$."\n    return None'),
        C("import pytest\nassert 1 + 1 == 2"),
        C("x = 3\nassert x > 0\nx"),
        C("fig_demo()"),
        C("fig_demo()"),
        C("#| label: fig-mine\nfig_demo()"),
        C("_ = interact(fig_demo)"),
        M("## Summary\n\nText.\n\n## Regenerate the figures\n\nSet it."),
        C("REGENERATE = False"),
    ])
    p = tmp_path / "01_x.ipynb"
    nbformat.write(nb, p)
    assert tag.main([str(p)]) == 0
    cells = json.loads(p.read_text())["cells"]
    src = ["".join(c["source"]) for c in cells]
    assert src[2].startswith("#| hide\n")
    assert src[3].startswith('#| code-fold: true\n#| code-summary: "Code and checks"\n')
    assert src[4].startswith('#| label: fig-demo\n#| fig-cap: "A demo figure of $x^2$."\n#| fig-alt: ')
    assert src[5].startswith("#| label: fig-demo-2\n") and src[6] == "#| label: fig-mine\nfig_demo()"
    assert src[7] == "_ = interact(fig_demo)" and src[1].startswith("#| export")
    assert src[8].rstrip() == "## Summary\n\nText." and src[9].startswith("## Regenerate")
    assert cells[9]["metadata"]["tags"] == ["remove-cell"] and cells[10]["metadata"]["tags"] == ["remove-cell"]
    before = p.read_text()
    assert tag.main([str(p), "--check"]) == 0 and p.read_text() == before, "a second run changes something"


def test_the_book_notebooks_are_tagged():
    "Every chapter carries its website cell options: a new test cell or figure without them fails here, not on the page."
    tag = _tools("tag_cells")
    assert tag.main(["--check"]) == 0, "run `make tag-cells` and commit the notebooks"


def test_core_figures_are_2x_files_shown_at_their_size(site):
    "Figures are PNG files beside the page, loaded lazily, with twice the pixels of their display size."
    soup = site.pages[page_of(CORE)]
    imgs = soup.select(".cell-output img")
    assert imgs
    fig = _tools("figures")
    for img in imgs:
        assert not img["src"].startswith("data:") and img.get("loading") == "lazy", img
        blob = (site.out / posixpath.dirname(page_of(CORE)) / unquote(img["src"])).read_bytes()
        w, h = fig.png_size(blob)
        assert fig.png_scale(blob) == 2 and abs(w - 2 * int(img["width"])) <= 1 and abs(h - 2 * int(img["height"])) <= 1, (img, w, h)


def test_png_tools():
    "tools/figures.py: the density tag is read from the PNG's text chunk and kept by the palette compression."
    import io

    from matplotlib.figure import Figure

    fig = _tools("figures")
    f = Figure(figsize=(3, 2))
    f.subplots().plot([0, 1, 3])
    for dpi in range(100, 140, 3):  # various CRCs after the tag: the tag is parsed, not pattern-matched
        b = io.BytesIO()
        f.savefig(b, format="png", dpi=dpi, metadata={fig.MARK_KEY: "2"})
        small = fig.compress_png(b.getvalue())
        assert fig.png_scale(b.getvalue()) == 2 == fig.png_scale(small) and fig.png_size(small) == fig.png_size(b.getvalue())
    assert len(small) < len(b.getvalue())


def test_min_font_tag():
    "tools/figures.py: hidpi()'s measure of the smallest visible text, written in the PNG beside the density tag."
    import io

    from matplotlib.figure import Figure

    fig = _tools("figures")
    f = Figure(figsize=(6, 2), dpi=110)
    a, b, c = f.subplots(1, 3)
    a.plot([0, 1], label="x")
    a.legend(fontsize=8)
    a.tick_params(labelsize=9)
    b.axis("off")  # the tick labels of an axes switched off are not drawn
    b.tick_params(labelsize=4)
    b.text(0.5, 0.5, "hidden", fontsize=3, visible=False)
    c.set_title("", fontsize=2)  # empty texts do not count
    c.set_xlabel("x", fontsize=12)
    c.tick_params(labelsize=11)
    assert fig.min_font_pt(f) == 8
    c.annotate("note", (0.5, 0.5), fontsize=7.5)
    assert fig.min_font_pt(f) == 7.5
    assert fig.min_font_pt(Figure()) is None
    b = io.BytesIO()
    f.savefig(b, format="png", dpi=220, metadata={fig.MARK_KEY: "2", fig.FONT_KEY: "7.5", fig.DPI_KEY: "110"})
    assert fig.png_min_font_pt(b.getvalue()) == (7.5, 110.0) == fig.png_min_font_pt(fig.compress_png(b.getvalue()))
    plain = io.BytesIO()
    f.savefig(plain, format="png", dpi=50)
    assert fig.png_min_font_pt(plain.getvalue()) is None and fig.png_scale(plain.getvalue()) == 1


def test_wide_figures_get_the_outset_class(tmp_path):
    "tools/figures.py: a figure wider than OUTSET_PX (at 1x) may outgrow the column; a strip keeps its zoom link."
    import base64
    import io

    from matplotlib.figure import Figure

    fig = _tools("figures")

    def img(w_in, h_in):
        f = Figure(figsize=(w_in, h_in), dpi=100)
        f.subplots().plot([0, 1])
        b = io.BytesIO()
        f.savefig(b, format="png", dpi=200, metadata={fig.MARK_KEY: "2"})
        return f'<img src="data:image/png;base64,{base64.b64encode(b.getvalue()).decode()}">'

    page = tmp_path / "p.html"
    html, n = fig.extract_images(f"<p>{img(4, 3)}</p><p>{img(9, 6)}</p><p>{img(12, 3)}</p>", page, tmp_path)
    assert n == 3
    small, wide, strip = html.split("</p>")[:3]
    assert fig.OUTSET not in small and 'width="400"' in small
    assert f'<span class="{fig.OUTSET}"><img' in wide and 'width="900"' in wide
    assert f'<a class="bn-zoom {fig.OUTSET}"' in strip and "<span" not in strip


def test_book_pages_transforms():
    "tools/book_pages.py: warnings dropped, manual numbers stripped, show_doc headings unlisted, crossrefs numbered."
    from execnb.nbio import dict2nb, mk_cell

    bp = _tools("book_pages")
    assert bp.strip_warnings("/home/x/a.py:3: RuntimeWarning: overflow\n  y = np.exp(x)\nreal output\n") == "real output\n"
    nb = dict2nb({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    code = mk_cell("#| label: fig-a\n#| fig-cap: \"First.\"\nfig_a()", "code")
    warn = mk_cell("f()", "code")
    warn["outputs"] = [{"output_type": "stream", "name": "stderr", "text": "/x.py:1: UserWarning: w\n  f()\n"}]
    doc = mk_cell("#| echo: false\nshow_doc(f)", "code")
    doc["outputs"] = [{"output_type": "display_data", "metadata": {},
                       "data": {"text/markdown": "---\n\n### f\n\n```python\ndef f()\n```\n\n*Do a thing.*"}}]
    seed = mk_cell('import os\nSEED = int(os.environ.get("BAYESNOTES_SEED", 0))  # offset of every seed below', "code")
    seed2 = mk_cell('import os\nSEED = int(os.environ.get("BAYESNOTES_SEED", 0))\nprint(SEED)', "code")   # not only setup: kept
    nb.cells += [mk_cell("## 2. Mean field\n\nSee @fig-a and $$x=1$$ {#eq-one}, [@eq-one].", "markdown"), code, warn, doc, seed, seed2]
    out = bp.book_pages(nb, number_sections=True, warnings=False)
    assert out == {"warnings dropped": 1, "seed cells dropped": 1, "section numbers stripped": 1, "api entries": 1}
    assert seed not in nb.cells and seed2 in nb.cells
    nb.cells.remove(seed2)
    assert nb.cells[0].source.startswith("## Mean field") and nb.cells[2].outputs == []
    assert "### f {.unnumbered .unlisted}" in nb.cells[-1].outputs[0]["data"]["text/markdown"]
    # the signature moved from the body to the end, after the API reference list that links it
    assert nb.cells[-2].source.startswith("## API reference {.unnumbered}") and "[`f`](#f): Do a thing." in nb.cells[-2].source
    assert [c.source for c in nb.cells[:3]] == ["## Mean field\n\nSee @fig-a and $$x=1$$ {#eq-one}, [@eq-one].", code.source, "f()"]
    found = bp.crossrefs(nb)
    assert found == {"fig-a": "Figure 1", "eq-one": "Equation 1"}
    assert '#| fig-cap: "Figure 1: First."' in nb.cells[1].source
    md = nb.cells[0].source
    assert "[Figure 1](#fig-a)" in md and "[Equation 1](#eq-one)" in md and '<div id="eq-one" class="bn-eq">' in md and '<span class="bn-eqno">(1)</span>' in md
    # an unlabelled display before a labelled one in the same cell keeps its place; the anchor goes to the labelled one
    nb2 = dict2nb({"cells": [mk_cell("$$a=1$$\n\nText.\n\n$$b=2$$ {#eq-b} and @eq-b", "markdown")], "metadata": {},
                   "nbformat": 4, "nbformat_minor": 5})
    assert bp.crossrefs(nb2) == {"eq-b": "Equation 1"}
    md2 = nb2.cells[0].source
    assert md2.startswith("$$a=1$$") and md2.index('<div id="eq-b"') > md2.index("Text.") and "$$b=2$$" in md2 and '"bn-eqno">(1)<' in md2


def test_scrubber_for_an_interact_cell(tmp_path):
    """A tiny project with one `interact` cell: the build renders its function on a grid of the control values and the
    page gets a scrubber (frames as files, one per setting; no widget JavaScript)."""
    import nbformat

    proj = tmp_path / "mini"
    (proj / "nbs").mkdir(parents=True)
    (proj / "mini").mkdir()
    (proj / "mini" / "__init__.py").write_text("")
    (proj / "mini" / "_modidx.py").write_text("d = {'settings': {'lib_path': 'mini'}, 'syms': {}}\n")
    (proj / "settings.ini").write_text(
        "[DEFAULT]\nrepo = mini\nlib_name = mini\nversion = 0.0.1\nmin_python = 3.10\nlicense = apache2\ndoc_path = _docs\n"
        "lib_path = mini\nnbs_path = nbs\nrecursive = True\ntst_flags = notest\nbranch = main\ncustom_sidebar = False\n"
        "doc_host = https://example.org\ndoc_baseurl = /mini\ngit_url = https://github.com/example/mini\ntitle = mini\n"
        "audience = Developers\nauthor = A\nauthor_email = a@example.org\ncopyright = 2026\ndescription = d\nkeywords = k\n"
        "language = English\nstatus = 3\nuser = example\nreadme_nb = index.ipynb\nallowed_metadata_keys = \n"
        "allowed_cell_metadata_keys = \njupyter_hooks = False\nclean_ids = True\nclear_all = False\ncell_number = True\n"
        "skip_procs = \nput_version_in_init = False\nblack_formatting = False\nupdate_pyproject = False\n")
    (proj / "_quarto.yml").write_text("project:\n  type: website\nformat:\n  html:\n    toc: true\nwebsite:\n  title: mini\n"
                                      "  sidebar:\n    contents:\n      - index.ipynb\n      - 01_w.ipynb\n")
    (proj / "nbs" / "_quarto.yml").symlink_to("../_quarto.yml")
    M, C = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    nbformat.write(nbformat.v4.new_notebook(cells=[M("# mini\n\n> d")]), proj / "nbs" / "index.ipynb")
    code = ("from ipywidgets import interact, IntSlider, fixed\n"
            "def show(n=2, kind='a', seed=0):\n    print(f'n={n} kind={kind}')\n"
            "_ = interact(show, n=IntSlider(value=2, min=1, max=4), kind=['a', 'b'], seed=fixed(0));")
    nbformat.write(nbformat.v4.new_notebook(cells=[M("# W\n\n> a widget"), C(code)]), proj / "nbs" / "01_w.ipynb")
    out = tmp_path / "site"
    r = subprocess.run([sys.executable, str(TOOLS / "build_site.py"), "--root", str(proj), "--fallback", "--no-export",
                        "--out", str(out), "--build-dir", str(tmp_path / "build")], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    soup = bs4.BeautifulSoup((out / "w.html").read_text(), "html.parser")
    sc = soup.select_one(".bn-scrubber")
    assert sc is not None, (r.stdout + r.stderr)[-3000:]
    data = json.loads(sc["data-bn-scrubber"])
    assert [c["label"] for c in data["controls"]] == ["n", "kind"] and data["controls"][0]["values"] == ["1", "2", "3", "4"]
    assert len(data["frames"]) == 8 and data["frames"]["1,0"]["text"] == "n=2 kind=a"  # 4 x 2: the full grid
    assert data["frames"]["3,1"]["text"] == "n=4 kind=b"
    assert sc.select("input[type=range]") and sc.select("select") and "seed" in sc.get_text()
    assert not soup.find("script", type=re.compile("jupyter.widget"))
