"""The offline website: build it once into a temporary folder and check it the way a reader would use it.

The build is `tools/build_site.py --fallback` (nbdev's processors + smalldocs, no Quarto) executing only the
fast notebooks (the full notebooks are executed by nbval in the notebook tests); every notebook in nbs/ still
gets a page. Nothing is written to the repository: output and staging go to pytest's tmp dirs, and the build
does not re-export the package (tests/test_nbdev_sync.py checks that the package is in sync).
"""
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
    listed = [c if isinstance(c, str) else (c.get("href") or c.get("file")) for c in cfg["website"]["sidebar"]["contents"]]
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


def test_math_has_katex_and_delimiters(site):
    with_math = 0
    for name, soup in site.pages.items():
        spans = soup.select("span.math")
        if not spans:
            continue
        with_math += 1
        srcs = " ".join(s.get("src", "") for s in soup.find_all("script"))
        assert "katex.min.js" in srcs and "auto-render.min.js" in srcs, f"{name} has maths but no KaTeX"
        assert soup.find("link", href=re.compile("katex.min.css")), f"{name}: no KaTeX stylesheet"
        for s in spans:
            t = s.get_text()
            assert (t.startswith("\\(") and t.endswith("\\)")) or (t.startswith("\\[") and t.endswith("\\]")), t
    assert with_math, "no page has maths"
    js = (site.out / "site_libs" / "smalldocs.js").read_text()
    assert "renderMathInElement" in js and '"\\\\["' in js and '"\\\\("' in js, "the KaTeX auto-render delimiters changed"


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


def test_widget_views_have_state(site):
    for name, soup in site.pages.items():
        views = soup.find_all("script", type="application/vnd.jupyter.widget-view+json")
        if not views:
            continue
        state = soup.find("script", type="application/vnd.jupyter.widget-state+json")
        assert state is not None, f"{name}: widget views without saved widget state"
        models = json.loads(state.string)["state"]
        for v in views:
            assert json.loads(v.string)["model_id"] in models, f"{name}: widget view without its model"
        assert soup.find("script", src=re.compile("html-manager")), f"{name}: widgets without the embed script"


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
