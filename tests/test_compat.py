"""tools/compat.py: every nbdev/execnb/fastcore/smalldocs internal the site build touches, one test each.

When one of these fails after an upgrade, the message names the library, its version and the wrapper in
tools/compat.py to update. The HTML patterns are checked on what the installed smalldocs writes for a tiny site
(built here in well under a second), so a change of smalldocs' markup fails here, not as a subtly wrong website.
Fast (a few seconds), no network, no Quarto.
"""
import inspect
import sys
from pathlib import Path

import pytest

pytest.importorskip("nbdev")
pytest.importorskip("smalldocs")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import compat  # noqa: E402


# ------------------------------------------------------------------------------------------ every internal name
@pytest.mark.parametrize("lib,module,name,params,used", compat.INTERNALS, ids=[f"{m}.{n}" for _, m, n, _, _ in compat.INTERNALS])
def test_internal_exists_with_its_signature(lib, module, name, params, used):
    obj = compat.internal(module, name)
    assert obj is not None, used
    if params is not None:
        assert tuple(inspect.signature(obj).parameters)[:len(params)] == tuple(params)


def test_missing_internal_names_library_and_version():
    with pytest.raises(compat.CompatError, match=r"nbdev \d[\w.]*: nbdev\.doclinks\._no_such_name does not exist.*tools/compat\.py"):
        compat._internal("nbdev", "nbdev.doclinks", "_no_such_name")
    with pytest.raises(compat.CompatError, match=r"takes \('p',\), not \(path, \.\.\.\)"):
        compat._internal("nbdev", "nbdev.doclinks", "_nbpath2html", ("path",))


def test_compat_is_the_only_importer():
    "No other tool imports nbdev, execnb, fastcore or smalldocs (the upgrade surface is tools/compat.py)."
    import re

    bad = []
    for f in sorted((ROOT / "tools").glob("*.py")):
        if f.name == "compat.py":
            continue
        for k, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            if re.match(r"\s*(from|import)\s+(nbdev|execnb|fastcore|smalldocs)\b", line):
                bad.append(f"{f.name}:{k}: {line.strip()}")
    assert not bad, bad


# ------------------------------------------------------------------------------------------ nbdev wrappers
def test_page_name():
    assert compat.page_name(Path("00_core.ipynb")).as_posix() == "core.html"
    assert compat.page_name(Path("sub/04b_Diagnostics.ipynb")).as_posix() == "sub/diagnostics.html"


def test_directive():
    assert compat.directive("#| eval: false") == ("eval:", ["false"])
    assert compat.directive("#|export") == ("export", [])


def test_config_and_caches_clear():
    compat.clear_nbdev_caches()
    for mod, name in (("nbdev.config", "get_config"), ("nbdev.doclinks", "_build_lookup_table")):
        assert callable(compat.internal(mod, name).cache_clear)


def test_nbglob_and_export_are_callable():
    assert callable(compat.internal("nbdev.doclinks", "nbdev_export.__wrapped__"))
    assert callable(compat.internal("nbdev.quarto", "nbdev_docs.__wrapped__"))
    nbs = compat.nbglob(ROOT / "nbs")
    assert any(Path(p).name == "index.ipynb" for p in nbs)


def test_default_exp_do_eval_and_cell_attributes():
    "The notebook/cell attributes the show_doc adapter reads are the ones nbdev's NBProcessor sets."
    from execnb.nbio import dict2nb
    from nbdev.process import NBProcessor

    nb = dict2nb({"cells": [compat.mk_cell("#| default_exp core"), compat.mk_cell("#| export\nimport os\nx = 1"),
                            compat.mk_cell("#| eval: false\nimport os"), compat.mk_cell("y = 2")],
                  "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    NBProcessor(nb=nb, procs=[])  # sets directives_ and idx_ on each cell
    assert compat.default_exp(nb) == "core"
    assert [compat.do_eval(c) for c in nb.cells[1:]] == [True, False, False]
    base = compat.show_docs_processor_base()
    assert base.cell_directives(nb.cells[1]) == {"export": []}
    assert base.cell_index(nb.cells[2]) == 2 and base.cell_has_show_doc(nb.cells[3]) is False
    with pytest.raises(compat.CompatError, match="directives_"):
        base.cell_directives(__import__("types").SimpleNamespace(source="x = 1"))


def test_show_doc_flags_set_by_nbdev():
    "nbdev's add_show_docs marks the notebook (`has_docs_`) and the show_doc cells it inserts (`has_sd`)."
    from execnb.nbio import dict2nb
    from nbdev.process import NBProcessor
    from nbdev.processors import add_show_docs

    nb = dict2nb({"cells": [compat.mk_cell("#| export\ndef f(): pass")], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    NBProcessor(nb=nb, procs=[add_show_docs]).process()
    assert nb.has_docs_
    assert [compat.show_docs_processor_base().cell_has_show_doc(c) for c in nb.cells] == [False, True]


def test_doc_processors_and_filters():
    fd, esd = compat.doc_processor_classes()
    assert esd in fd().base_procs()
    base = compat.show_docs_processor_base()

    class Mine(base):
        pass

    filters = compat.doc_filters_class({esd: Mine})()
    assert Mine in filters.base_procs() and esd not in filters.base_procs()
    for name in ("has_shell", "shell_run", "shell_cell", "shell_error", "clear_shell_error", "notebook_has_docs", "frontmatter"):
        assert hasattr(base, name)
    src = inspect.getsource(esd.begin)
    assert "self.k" in src and "CaptureShell" in src, "exec_show_docs no longer keeps its shell in self.k"


def test_nbdev_docs_filters_patch_and_restore():
    import nbdev.serve

    orig = nbdev.serve.FilterDefaults
    with compat.nbdev_docs_filters(lambda: "mine"):
        assert nbdev.serve.FilterDefaults() == "mine"
    assert nbdev.serve.FilterDefaults is orig
    assert "FilterDefaults" in inspect.getsource(nbdev.serve._proc_file), "proc_nbs no longer uses nbdev.serve.FilterDefaults"


def test_register_lookup_and_lineno():
    import nbdev.doclinks as dl

    compat.register_nbdev_lookup("bayesnotes")
    assert any(e.name == "bayesnotes" for e in dl.entry_points(group="nbdev"))
    assert "entry_points(group='nbdev')" in inspect.getsource(dl._build_lookup_table)
    assert compat.exported_lineno("x", None) is None


def test_exported_lineno(tmp_path, monkeypatch):
    "nbdev finds a module file as `package/module.py` (the package by import) and the line of each def."
    pkg = tmp_path / "bn_compat_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "m.py").write_text("import os\n\n\ndef foo():\n    pass\n\n\nclass Bar:\n    def baz(self):\n        pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert compat.exported_lineno("foo", "bn_compat_pkg/m.py") == 4
    assert compat.exported_lineno("Bar.baz", "bn_compat_pkg/m.py") == 9


def test_nb_path_and_notebook_io(tmp_path):
    nb = compat.read_nb(ROOT / "nbs" / "index.ipynb")
    assert compat.nb_path(nb).endswith("index.ipynb")
    compat.set_nb_path(nb, tmp_path / "x.ipynb")
    assert compat.nb_path(nb) == str(tmp_path / "x.ipynb")
    compat.write_nb(nb, tmp_path / "x.ipynb")
    text = (tmp_path / "x.ipynb").read_text(encoding="utf-8")
    assert text.startswith("{\n \"cells\"") and text.endswith("\n")
    assert compat.nb2str({"b": 1, "a": 2}) == '{\n "a": 2,\n "b": 1\n}\n'
    assert compat.str2bool("true") is True and compat.str2bool("0") is False


# ------------------------------------------------------------------------------------------ nbdev's markdown
def _showdoc_md(obj):
    from nbdev.showdoc import show_doc

    return show_doc(obj)._repr_markdown_()


def test_showdoc_markup():
    "show_doc's heading, summary and [source] link, and the fold options nbdev puts on `#| exports` cells."
    from nbdev.doclinks import nbglob
    from nbdev.processors import add_fold

    md = _showdoc_md(nbglob)
    m = compat.showdoc_heading(md, "test")
    assert m and m.group(2).strip() == "nbglob"
    assert compat.showdoc_summary(md[m.end():]).startswith("Find all files")
    assert compat.SHOWDOC_SOURCE.search(md), md[:300]
    assert "[source](https://x/y#L3)" in compat.set_showdoc_source_link(md, "https://x/y#L3")
    with pytest.raises(compat.MarkupChanged):
        compat.showdoc_heading("no heading here", "test")
    with pytest.raises(compat.MarkupChanged):
        compat.set_showdoc_source_link("[source] (elsewhere)", "u", "test")
    cell = compat.mk_cell("#| exports\ndef f(): pass")
    from nbdev.process import NBProcessor
    from execnb.nbio import dict2nb

    nb = dict2nb({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    NBProcessor(nb=nb, procs=[add_fold]).process()
    src = nb.cells[0].source
    assert compat.EXPORTS_FOLD_OPEN in src and compat.EXPORTS_SUMMARY in src, src


# ------------------------------------------------------------------------------------------ smalldocs
QUARTO_YML = """project:
  type: website
format:
  html:
    toc: true
    number-sections: true
bibliography: refs.bib
website:
  title: "t"
  navbar:
    left:
      - text: "Home"
        href: index.md
    right:
      - icon: github
        href: "https://github.com/x/y"
  sidebar:
    contents:
      - index.md
"""
PAGE = """---
title: "T"
---

## First section

See [`f`](#f), [`g`](index.html#g) and $x^2$.

### f {.unnumbered .unlisted}

text

## API reference {.unnumbered}

- [`f`](#f): summary
"""


@pytest.fixture(scope="module")
def tiny_site(tmp_path_factory):
    "What the installed smalldocs writes for a one-page site with the constructs the build patches."
    root = tmp_path_factory.mktemp("sd")
    (root / "_quarto.yml").write_text(QUARTO_YML)
    (root / "index.md").write_text(PAGE)
    site = compat.smalldocs_build(root, quiet=True)
    html = (root / "_site" / "index.html").read_text(encoding="utf-8")
    return site, html, root / "_site"


def test_smalldocs_build_and_expected_warnings(tiny_site):
    site, html, _ = tiny_site
    assert isinstance(site.warnings, list)
    assert all(compat.expected_smalldocs_warning(w) for w in site.warnings), site.warnings
    assert any("bibliography" in w for w in site.warnings), "smalldocs now knows `bibliography`: drop the expectation"
    assert not compat.expected_smalldocs_warning("something else")


def test_number_toc(tiny_site):
    _, html, _ = tiny_site
    assert compat.HEADING_NUMBER.search(html), "numbered headings"
    assert compat.TOC_LINK.search(html), "table-of-contents links"
    out = compat.number_toc(html, "index.html")
    assert 'id="toc-first-section" class="nav-link" data-scroll-target="#first-section"><span class="header-section-number">1</span> First' in out
    broken = html.replace('"><span class="header-section-number">', '"> <span class="header-section-number">')
    with pytest.raises(compat.MarkupChanged, match="index.html.*HEADING_NUMBER"):
        compat.number_toc(broken, "index.html")
    with pytest.raises(compat.MarkupChanged, match="TOC_LINK"):
        compat.number_toc(html.replace('class="nav-link" data-scroll-target', 'data-scroll-target'), "index.html")


def test_unlisted_ids(tiny_site):
    _, html, _ = tiny_site
    assert compat.unlisted_ids(html, "index.html") == ["f"]
    with pytest.raises(compat.MarkupChanged, match="UNLISTED"):
        compat.unlisted_ids(html.replace('<section id="f" class=', '<section class='), "index.html")


def test_code_links(tiny_site):
    _, html, _ = tiny_site
    seen = []
    out = compat.rewrite_code_links(html, lambda href, inner: seen.append(href) or inner, "index.html")
    assert seen.count("#f") == 2 and "index.html#g" in seen
    assert "<code>g</code>" in out and 'href="index.html#g"' not in out
    with pytest.raises(compat.MarkupChanged, match="CODE_LINK"):
        compat.rewrite_code_links(html.replace('<a href="#f">', '<a class="x" href="#f">').replace('<a href="index.html#g">', '<a class="x" href="index.html#g">'),
                                  lambda h, i: i, "index.html")


def test_icon_only_nav(tiny_site):
    _, html, _ = tiny_site
    assert compat.ICON_ONLY_NAV.search(html), "smalldocs no longer repeats the URL of an icon-only navbar entry"
    out = compat.icon_only_nav_links(html, "index.html")
    assert '<a class="nav-link" href="https://github.com/x/y" aria-label="https://github.com/x/y"><i class="bi bi-github" role="img"></i></a>' in out
    with pytest.raises(compat.MarkupChanged, match="ICON_ONLY_NAV"):
        compat.icon_only_nav_links(html.replace('role="img"></i> <span', 'role="img"></i><span'), "index.html")


def test_images_get_alt_text():
    assert compat.add_missing_alt('<img src="a.png"><img alt="x" src="b.png">', "F") == '<img alt="F" src="a.png"><img alt="x" src="b.png">'


def test_search_index(tiny_site):
    import json

    _, _, out = tiny_site
    entries = compat.check_search_entries(json.loads((out / "search.json").read_text(encoding="utf-8")))
    assert entries and all(set(compat.SEARCH_KEYS) <= set(e) for e in entries)
    with pytest.raises(compat.MarkupChanged):
        compat.check_search_entries({"docs": []})


def test_search_keywords(tiny_site):
    "The search script's Fuse keys are still the ones the build extends with the glossary's keywords."
    _, _, out = tiny_site
    js = (out / "site_libs" / "smalldocs.js").read_text(encoding="utf-8")
    new = compat.add_search_keywords(js, 4, "smalldocs.js")
    assert new.count('{ name: "keywords", weight: 4 }') == 1 and len(new) > len(js)
    with pytest.raises(compat.MarkupChanged, match="FUSE_KEYS"):
        compat.add_search_keywords(js.replace('{ name: "text", weight: 1 }', '{ name: "text", weight: 1.5 }'), 4)


def test_parser_and_notebook_markdown():
    "The maths tokens site_math collects, from smalldocs' parser and notebook reader."
    import json

    md = compat.markdown_parser()
    types = {t.type for t in md.parse("a $x$ b\n\n$$y$$\n", {})} | {c.type for t in md.parse("a $x$ b", {}) for c in (t.children or [])}
    assert "math_inline" in types and any(t.startswith("math_") and t != "math_inline" for t in types), types
    nb = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": "# Title\n\nText $z$."}], "metadata": {},
          "nbformat": 4, "nbformat_minor": 5}
    front, body = compat.notebook_markdown(json.dumps(nb))
    assert isinstance(front, dict) and "$z$" in body


def test_smalldocs_mathml(tmp_path):
    "Inside the context, smalldocs' maths rules write the converter's MathML and headings get Unicode text."

    class Conv:
        def mathml(self, tex, display):
            return f"<math data-tex='{tex}' display='{display}'></math>"

        def text(self, tex):
            return f"U({tex})"

    (tmp_path / "_quarto.yml").write_text("project:\n  type: website\nformat:\n  html:\n    toc: true\nwebsite:\n  title: t\n")
    (tmp_path / "index.md").write_text("---\ntitle: T\n---\n\n## About $\\alpha$\n\nInline $x$.\n\n$$y$$\n")
    import smalldocs.markdown as sm

    before = sm.math_inline
    with compat.smalldocs_mathml(Conv()):
        compat.smalldocs_build(tmp_path, quiet=True)
    assert sm.math_inline is before
    html = (tmp_path / "_site" / "index.html").read_text(encoding="utf-8")
    assert "<math data-tex='x' display='False'>" in html and "<math data-tex='y' display='True'>" in html
    assert 'id="about-alpha"' in html and "U(\\alpha)" in html
    assert "katex" not in html.lower()


def test_memoised_highlight_classes_give_the_same_html(monkeypatch):
    "The build's memoised `css_class` (tools/compat.py) leaves smalldocs' highlighted HTML unchanged."
    import smalldocs.highlight as h

    monkeypatch.setattr(h, "css_class", h.css_class)  # restored after the test
    code = [(Path(compat.__file__).read_text(), "python"), ("for x in a; do if [ -z $x ]; then echo no; fi; done", "bash"),
            ("def f(x):\n    while x:\n        yield x  # c\n    return None\n", "python"), ("a: [1, 2]\n", "yaml")]
    plain = [h.highlight(c, lang) for c, lang in code]
    assert any('class="cf"' in s for s in plain) and any('class="kw"' in s for s in plain)
    compat.memoise_highlight_classes()
    assert getattr(h.css_class, "_bn_memoised", False)
    assert [h.highlight(c, lang) for c, lang in code] == plain


def test_math_converter_batches_pandoc_calls(monkeypatch):
    """`MathConverter.prepare` converts a page's formulas in at most three pandoc runs (MathML, Unicode text, and
    the MathML of the formulas pandoc has no text for), never one run per formula; repeats cost nothing."""
    from mathml import MathConverter

    conv = MathConverter()
    conv.api_version()
    runs = []
    real = conv._run
    monkeypatch.setattr(conv, "_run", lambda args, stdin: runs.append(args) or real(args, stdin))
    formulas = [(r"\alpha + \beta", False), (r"\frac{a}{b}", True), (r"\sqrt{x^2 + 1}", False),
                (r"\sum_{i=1}^N w_i", True), (r"\widehat{R}", False), (r"\int_0^1 f(x)\,dx", True)]
    conv.prepare(formulas)
    assert 2 <= len(runs) <= 3, runs
    assert all("<math" in conv.mathml(t, d) for t, d in formulas)
    assert conv.text(r"\alpha + \beta") == "α + β" and conv.text(r"\widehat{R}") == "R̂"
    assert all(conv.text(t) and "\\" not in conv.text(t) for t, _ in formulas)  # every formula has a text form
    n = len(runs)
    conv.prepare(formulas)
    assert len(runs) == n


def test_tex_to_text_writes_simple_scripts_without_brackets():
    """Figure captions become plain text with `tex_to_text`: a script pandoc has no Unicode character for loses
    the brackets pandoc's plain writer puts round it when it is a plain word, number or bracketed group, and keeps
    them when they are needed to read it ('E_(n − 1)', 'x_(n)y')."""
    from mathml import MathConverter, tex_to_text, tidy_scripts

    conv = MathConverter()
    cap = (r"$\alpha_k$ and $D_\alpha$, row $k$ decodes $(z^{(j)}, y = k)$, $(\sigma_p/\sigma_q)^D$, "
           r"($E_n - E_{n-1}$), $x_n y$, $\beta_t = (t/T)^4$, $\theta_{12}$, $\log\hat Z$")
    assert tex_to_text(cap, conv) == ("α_k and D_α, row k decodes (z^(j), y = k), (σ_p/σ_q)^D, (E_n − E_(n − 1)), "
                                      "x_(n)y, β_t = (t/T)⁴, θ₁₂, log Z\u0302")
    assert tidy_scripts("e^(−x) + x^(2n) + x_(i_(j))") == "e^(−x) + x^(2n) + x_(i_j)"
