"""The one place where tools/ touches the internals of nbdev, execnb, fastcore and smalldocs.

The site build (tools/build_site.py and the modules it uses) needs a few names that these libraries do not document
(`nbdev.doclinks._nbpath2html`, `nbdev.processors._do_eval`, smalldocs' maths render rules, ...) and the exact HTML
smalldocs writes (it patches section numbers into the table of contents, for instance). All of them are reached
through this module and nowhere else in tools/, so that an upgrade of one of those libraries fails here, loudly and
with a message that names the library, its version and the wrapper to update, instead of building a subtly wrong
site. tests/test_compat.py has a test for every name and pattern below (`INTERNALS` lists the names).

Three kinds of things live here:

- **internal names**, resolved lazily (importing this module imports none of the libraries) by `_internal`,
  which checks that the name exists and, where it matters, its parameters;
- **adapters** for the classes the build subclasses or patches: `ShowDocsProcessor` (nbdev's `exec_show_docs`),
  `DocFilters` (nbdev's `FilterDefaults`), `nbdev_docs_filters` (what `nbdev_docs` processes notebooks with),
  `register_nbdev_lookup` (nbdev's symbol lookup), `smalldocs_mathml` (smalldocs' maths rendering);
- **markup**: the regular expressions that read nbdev's show_doc markdown and patch smalldocs' HTML, as named
  functions. Each one raises `MarkupChanged` when the markup it must find on a page is not there (a looser
  pattern sees the construct, the exact one matches nothing), so a changed markup stops the build here.

Public, documented names (`get_config`, `nbglob`, execnb's notebook I/O, `str2bool`, `smalldocs.site.build`) are
re-exported from here too, so the whole upgrade surface is this one file.
"""
from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

# the versions this module was written against (an error message names the installed one next to these)
TESTED = {"nbdev": "2.4.14", "execnb": "0.1.18", "fastcore": "1.14.5", "smalldocs": "0.5.4"}

_MISSING = object()


class CompatError(RuntimeError):
    "An internal of nbdev, execnb, fastcore or smalldocs that tools/compat.py relies on is missing or changed."


class MarkupChanged(CompatError):
    "The markup nbdev or smalldocs writes no longer matches the pattern tools/compat.py patches it with."


def version(lib: str) -> str:
    "The installed version of `lib` ('not installed' when it is not)."
    import importlib.metadata as md

    try:
        return md.version(lib)
    except md.PackageNotFoundError:
        return "not installed"


def _fail(lib: str, what: str, wrapper: str, cls=CompatError):
    raise cls(f"{lib} {version(lib)}: {what}. tools/compat.py ({wrapper}) was written for {lib} {TESTED.get(lib, '?')}; "
              "update it for this version (and tests/test_compat.py)")


def _internal(lib: str, module: str, name: str, params: tuple | None = None, wrapper: str = ""):
    """`module.name` (a dotted name for class attributes), checked: it exists, and when `params` is given its
    parameters start with those names. Raises CompatError naming the library's version otherwise."""
    try:
        obj = importlib.import_module(module)
    except ImportError as e:
        _fail(lib, f"cannot import {module} ({e})", wrapper or name)
    for part in name.split("."):
        obj = getattr(obj, part, _MISSING)
        if obj is _MISSING:
            _fail(lib, f"{module}.{name} does not exist", wrapper or name)
    if params is not None:
        try:
            got = tuple(inspect.signature(obj).parameters)
        except (TypeError, ValueError):
            got = None
        if got is None or got[:len(params)] != tuple(params):
            _fail(lib, f"{module}.{name} takes {got}, not ({', '.join(params)}, ...)", wrapper or name)
    return obj


# One line per internal name: (library, module, name, leading parameters or None, what the build uses it for).
# tests/test_compat.py resolves every one of them.
INTERNALS = [
    ("nbdev", "nbdev.config", "get_config", ("cfg_name", "path"), "settings.ini of the project; lru-cached (cache_clear)"),
    ("nbdev", "nbdev.doclinks", "_build_lookup_table", ("strip_libs", "incl_libs", "skip_mods"), "symbol lookup for doc links; lru-cached"),
    ("nbdev", "nbdev.doclinks", "entry_points", None, "what _build_lookup_table lists packages with (patched)"),
    ("nbdev", "nbdev.doclinks", "nbglob", ("path",), "the notebooks nbdev documents"),
    ("nbdev", "nbdev.doclinks", "_nbpath2html", ("p",), "page name of a notebook (00_core.ipynb -> core.html)"),
    ("nbdev", "nbdev.doclinks", "nbdev_export.__wrapped__", None, "nbdev_export without its command-line parser"),
    ("nbdev", "nbdev.doclinks", "_lineno", ("sym", "fname"), "line of an exported name in a module (source links)"),
    ("nbdev", "nbdev.process", "_directive", ("s", "lang"), "parse one `#| key: value` line"),
    ("nbdev", "nbdev.processors", "FilterDefaults.base_procs", ("self",), "nbdev_docs' notebook processors"),
    ("nbdev", "nbdev.processors", "exec_show_docs", None, "the processor that runs cells for show_doc"),
    ("nbdev", "nbdev.processors", "_default_exp", ("nb",), "a notebook's default_exp module"),
    ("nbdev", "nbdev.processors", "_do_eval", ("cell",), "whether nbdev's doc shell runs a cell"),
    ("nbdev", "nbdev.serve", "FilterDefaults", None, "the filters proc_nbs (nbdev_docs) applies (patched)"),
    ("nbdev", "nbdev.quarto", "nbdev_docs.__wrapped__", ("path", "n_workers"), "nbdev_docs in-process (Quarto route)"),
    ("execnb", "execnb.shell", "CaptureShell.run", ("self", "code"), "exec_show_docs' shell: run code"),
    ("execnb", "execnb.shell", "CaptureShell.cell", ("self", "cell"), "exec_show_docs' shell: run a cell into its outputs"),
    ("execnb", "execnb.nbio", "read_nb", ("path",), "read a notebook as nbdev does"),
    ("execnb", "execnb.nbio", "write_nb", ("nb", "path"), "write a notebook as nbdev does"),
    ("execnb", "execnb.nbio", "mk_cell", ("text", "cell_type"), "make a cell"),
    ("execnb", "execnb.nbio", "nb2str", ("nb",), "nbdev_clean's notebook text"),
    ("fastcore", "fastcore.basics", "str2bool", ("s",), "front-matter flags"),
    ("smalldocs", "smalldocs.site", "build", ("root", "quiet"), "render the offline site"),
    ("smalldocs", "smalldocs.highlight", "css_class", ("ttype", "value"), "a code token's class (memoised by token type)"),
    ("smalldocs", "smalldocs.highlight", "CONTROL", None, "control-flow keywords (class cf instead of kw)"),
    ("smalldocs", "smalldocs.markdown", "make_parser", (), "smalldocs' markdown parser (to find every formula)"),
    ("smalldocs", "smalldocs.notebook", "to_markdown", ("text",), "a notebook as front matter and markdown"),
    ("smalldocs", "smalldocs.markdown", "math_inline", ("self", "tokens", "idx", "options", "env"), "maths render rule (patched)"),
    ("smalldocs", "smalldocs.markdown", "math_display", ("self", "tokens", "idx", "options", "env"), "maths render rule (patched)"),
    ("smalldocs", "smalldocs.markdown", "math_block", ("self", "tokens", "idx", "options", "env"), "maths render rule (patched)"),
    ("smalldocs", "smalldocs.markdown", "plain", ("tokens",), "text of a heading or link (patched)"),
    ("smalldocs", "smalldocs.markdown", "Rules.ids", ("self", "state"), "heading identifiers (patched)"),
]


def internal(module: str, name: str):
    "Resolve one entry of INTERNALS by module and name (what tests/test_compat.py checks)."
    for lib, mod, nm, params, _ in INTERNALS:
        if (mod, nm) == (module, name):
            return _internal(lib, mod, nm, params, f"INTERNALS {module}.{name}")
    raise KeyError(f"{module}.{name} is not in tools/compat.py INTERNALS")


# ------------------------------------------------------------------------------------------ public re-exports
def get_config():
    "nbdev's settings.ini of the working directory (cached by nbdev; see `clear_nbdev_caches`)."
    return internal("nbdev.config", "get_config")()


def nbglob(path) -> list:
    "Every notebook under `path` that nbdev documents (files and folders starting `_` or `.` skipped)."
    return list(internal("nbdev.doclinks", "nbglob")(path))


def read_nb(path):
    "A notebook as execnb reads it (an AttrDict with `.cells`)."
    return internal("execnb.nbio", "read_nb")(path)


def write_nb(nb, path):
    "Write a notebook as nbdev_clean does."
    return internal("execnb.nbio", "write_nb")(nb, path)


def mk_cell(text: str, cell_type: str = "code"):
    "A new execnb cell."
    return internal("execnb.nbio", "mk_cell")(text, cell_type)


def nb2str(nb) -> str:
    "A notebook (a plain dict is fine) as the text nbdev_clean writes: sorted keys, one-space indent, final newline."
    return internal("execnb.nbio", "nb2str")(nb)


def set_nb_path(nb, path):
    "Record where a notebook comes from as execnb's `read_nb` does (`nb.path_`): nbdev's FrontmatterProc names the page from it."
    nb.path_ = str(path)


def nb_path(nb) -> str:
    "Where a notebook was read from (`nb.path_`, set by execnb's `read_nb` or `set_nb_path`), or ''."
    return str(getattr(nb, "path_", "") or "")


def str2bool(s) -> bool:
    "fastcore's reading of a flag (`'true'`, `'1'`, True, ...)."
    return internal("fastcore.basics", "str2bool")(s)


# ------------------------------------------------------------------------------------------ nbdev internals
def clear_nbdev_caches():
    """Forget nbdev's cached settings.ini and symbol lookup table. nbdev caches both with `lru_cache` and reads the
    config of the working directory, so a change of folder (a staging copy of the project) needs this."""
    for mod, name in (("nbdev.config", "get_config"), ("nbdev.doclinks", "_build_lookup_table")):
        f = internal(mod, name)
        if not callable(getattr(f, "cache_clear", None)):
            _fail("nbdev", f"{mod}.{name} is no longer lru-cached (no cache_clear)", "clear_nbdev_caches")
        f.cache_clear()


def page_name(nb) -> Path:
    "nbdev's page for a notebook path: numeric prefix dropped, lower case, .html (`00_core.ipynb` -> `core.html`)."
    return internal("nbdev.doclinks", "_nbpath2html")(Path(nb))


def export_package():
    "Run `nbdev_export` with its defaults in this process (the function under fastcore's `call_parse`)."
    f = internal("nbdev.doclinks", "nbdev_export.__wrapped__")
    if not callable(f):
        _fail("nbdev", "nbdev_export.__wrapped__ is not callable", "export_package")
    return f()


def nbdev_docs_in_process():
    "Run `nbdev_docs` (Quarto) in this process (`n_workers=0`), so the patched lookup and filters apply."
    return internal("nbdev.quarto", "nbdev_docs.__wrapped__")(n_workers=0)


def directive(line: str):
    "nbdev's reading of one `#| key: value` line: `('eval:', ['false'])`, or None for an empty directive."
    return internal("nbdev.process", "_directive")(line)


def default_exp(nb) -> str | None:
    "The notebook's `#| default_exp` module (dotted), or None."
    return internal("nbdev.processors", "_default_exp")(nb)


def do_eval(cell) -> bool:
    "Whether nbdev's doc shell runs this cell (exported cells, imports, show_doc calls; not `#| eval: false`)."
    return bool(internal("nbdev.processors", "_do_eval")(cell))


def exported_lineno(sym: str, fname) -> int | None:
    "The line where module file `fname` (relative to the project) defines `sym`, as nbdev's source links use it."
    return internal("nbdev.doclinks", "_lineno")(sym, fname)


def register_nbdev_lookup(lib_name: str):
    """Make nbdev's symbol lookup (doc links, show_doc's source links) know package `lib_name` even when it is not
    installed with its `nbdev` entry point, by adding the entry point setup.py declares (`<lib>._modidx:d`).
    nbdev's `_build_lookup_table` lists packages with `nbdev.doclinks.entry_points(group='nbdev')`; that name is
    patched once per process."""
    import importlib.metadata as md

    internal("nbdev.doclinks", "entry_points")
    import nbdev.doclinks as dl

    orig = dl.entry_points
    if getattr(orig, "_bayesnotes_patched", False):
        return

    def entry_points(**kw):
        eps = orig(**kw)
        if kw.get("group") == "nbdev" and not any(e.name == lib_name for e in eps):
            return [*eps, md.EntryPoint(name=lib_name, value=f"{lib_name}._modidx:d", group="nbdev")]
        return eps

    entry_points._bayesnotes_patched = True
    dl.entry_points = entry_points
    internal("nbdev.doclinks", "_build_lookup_table").cache_clear()


def doc_processor_classes():
    """nbdev's `(FilterDefaults, exec_show_docs)`, checked: `exec_show_docs` is one of FilterDefaults' processors
    and execnb's CaptureShell (its shell, `self.k`) runs code and cells."""
    internal("nbdev.processors", "FilterDefaults.base_procs")
    fd = importlib.import_module("nbdev.processors").FilterDefaults
    esd = internal("nbdev.processors", "exec_show_docs")
    internal("execnb.shell", "CaptureShell.run")
    internal("execnb.shell", "CaptureShell.cell")
    if esd not in fd().base_procs():
        _fail("nbdev", "exec_show_docs is not among FilterDefaults().base_procs()", "doc_processor_classes")
    return fd, esd


def show_docs_processor_base():
    """An adapter over nbdev's `exec_show_docs` (the processor nbdev_docs runs cells with for `show_doc`), giving
    subclasses documented names for what they use of its internals:

    - `has_shell` / `shell_run(code)` / `shell_cell(cell)` / `shell_error` / `clear_shell_error()`: its execnb
      CaptureShell `self.k`, made in `begin()` for Python notebooks, and the exception of the last run (`k.exc`);
    - `notebook_has_docs` (`nb.has_docs_`) and `frontmatter` (`nb.frontmatter_`), set by nbdev's processors;
    - `cell_directives(cell)` (`cell.directives_`), `cell_has_show_doc(cell)` (`cell.has_sd`), `cell_index(cell)`
      (`cell.idx_`)."""
    global _SHOW_DOCS_BASE
    if _SHOW_DOCS_BASE is not None:
        return _SHOW_DOCS_BASE
    esd = doc_processor_classes()[1]

    class ShowDocsProcessor(esd):
        @property
        def has_shell(self) -> bool:
            return hasattr(self, "k")

        def shell_run(self, code: str):
            return self.k.run(code)

        def shell_cell(self, cell):
            return self.k.cell(cell)

        @property
        def shell_error(self):
            return self.k.exc

        def clear_shell_error(self):
            self.k.exc = None

        @property
        def notebook_has_docs(self) -> bool:
            if not hasattr(self.nb, "has_docs_"):  # set by nbdev's add_show_docs, which runs before this processor
                _fail("nbdev", "notebooks have no `has_docs_` when exec_show_docs runs", "ShowDocsProcessor.notebook_has_docs")
            return bool(self.nb.has_docs_)

        @property
        def frontmatter(self) -> dict:
            return getattr(self.nb, "frontmatter_", {}) or {}

        @staticmethod
        def cell_directives(cell) -> dict:
            if not hasattr(cell, "directives_"):  # set by nbdev's NBProcessor on every cell
                _fail("nbdev", "cells have no `directives_` in nbdev's processors", "ShowDocsProcessor.cell_directives")
            return cell.directives_ or {}

        @staticmethod
        def cell_has_show_doc(cell) -> bool:
            return bool(getattr(cell, "has_sd", False))

        @staticmethod
        def cell_index(cell):
            return getattr(cell, "idx_", "?")

    ShowDocsProcessor.__qualname__ = ShowDocsProcessor.__name__ = "ShowDocsProcessor"
    _SHOW_DOCS_BASE = ShowDocsProcessor
    return ShowDocsProcessor


_SHOW_DOCS_BASE = None


def doc_filters_class(replace: dict):
    """A subclass of nbdev's `FilterDefaults` (the processors `nbdev_docs` runs on each notebook) whose processor list
    has each key of `replace` (an nbdev processor class, e.g. `exec_show_docs`) swapped for its value."""
    fd, _ = doc_processor_classes()

    class DocFilters(fd):
        def base_procs(self):
            return [replace.get(p, p) for p in super().base_procs()]

    return DocFilters


class nbdev_docs_filters:
    """While in this context, `nbdev_docs` (its `proc_nbs`, which calls `nbdev.serve.FilterDefaults()(nb)` for each
    notebook, in this process when `n_workers=0`) processes notebooks with `factory()` instead."""

    def __init__(self, factory):
        self.factory = factory

    def __enter__(self):
        internal("nbdev.serve", "FilterDefaults")
        import nbdev.serve

        self.mod, self.orig = nbdev.serve, nbdev.serve.FilterDefaults
        nbdev.serve.FilterDefaults = self.factory
        return self

    def __exit__(self, *exc):
        self.mod.FilterDefaults = self.orig


# ------------------------------------------------------------------------------------------ nbdev's markdown
# nbdev's `add_fold` processor puts these two options on `#| exports` cells (processors.py: "Exported source")
EXPORTS_FOLD_OPEN = "#| code-fold: show"
EXPORTS_SUMMARY = 'code-summary: "Exported source"'
# nbdev's show_doc markdown: `### name` (level 3, 4 for methods), then `> name (sig)`, then `*summary*`
SHOWDOC_HEAD = re.compile(r"^(#{2,6})[ \t]+([^\n{]+?)[ \t]*$", re.M)
SHOWDOC_SUMMARY = re.compile(r"^\*(?!\*)(.+?)\*\s*$", re.M)
SHOWDOC_SOURCE = re.compile(r"\[source\]\([^)\s]+\)")


def showdoc_heading(md: str, where: str = ""):
    """The heading of nbdev's show_doc markdown (`### name`, or `#### Class.method`) as a match: group 1 the `#`s,
    group 2 the name. MarkupChanged when non-empty show_doc markdown has no heading."""
    m = SHOWDOC_HEAD.search(md)
    if m is None and md.strip():
        _fail("nbdev", f"{where}: show_doc markdown has no `### name` heading", "showdoc_heading", MarkupChanged)
    return m


def showdoc_summary(md_after_heading: str) -> str:
    "The one-line summary of nbdev's show_doc markdown (`*Summary.*` on its own line, after the heading), or ''."
    m = SHOWDOC_SUMMARY.search(md_after_heading)
    return m.group(1).strip() if m else ""


def set_showdoc_source_link(md: str, url: str, where: str = "") -> str:
    """Point the `[source](...)` link of nbdev's show_doc markdown at `url`. nbdev writes it as
    `[source](https://github.com/...#L12)` on the line under the heading; MarkupChanged when show_doc markdown
    mentions `source` but has no such link."""
    new, n = SHOWDOC_SOURCE.subn(f"[source]({url})", md, count=1)
    if not n and re.search(r"\[source\]", md):
        _fail("nbdev", f"{where}: show_doc's `[source](url)` link has a new form", "set_showdoc_source_link", MarkupChanged)
    return new


# ------------------------------------------------------------------------------------------ smalldocs
def memoise_highlight_classes():
    """Make smalldocs' `css_class` look up each Pygments token type once (idempotent).

    It walks a list of ~30 token types for every token of every code block (about half a million tokens for the
    book, a fifth of the offline build's time); the class depends on the token type alone, except that a keyword
    in `CONTROL` gets `cf` instead of `kw`, which the wrapper keeps. Same output, bit for bit."""
    import functools

    mod = importlib.import_module("smalldocs.highlight")
    orig = internal("smalldocs.highlight", "css_class")
    if getattr(orig, "_bn_memoised", False):
        return
    control = internal("smalldocs.highlight", "CONTROL")
    by_type = functools.lru_cache(maxsize=None)(lambda ttype: orig(ttype, ""))

    def css_class(ttype, value):
        cls = by_type(ttype)
        return "cf" if cls == "kw" and value in control else cls

    css_class._bn_memoised = True
    mod.css_class = css_class


def smalldocs_build(root, quiet: bool = True):
    "Render the smalldocs site of folder `root` (its _quarto.yml); returns the Site, whose `.warnings` is a list of str."
    memoise_highlight_classes()
    site = internal("smalldocs.site", "build")(root, quiet=quiet)
    if not isinstance(getattr(site, "warnings", None), list):
        _fail("smalldocs", "smalldocs.site.build() returned no `.warnings` list", "smalldocs_build")
    return site


# smalldocs warnings the offline build expects: citations are resolved by tools/citations.py (so `bibliography`
# and `reference-location` are unknown keys to smalldocs), and the cells were executed by nbclient
_EXPECTED_WARNING = re.compile(r"unknown key (bibliography|reference-location)|executable cell\(s\) shown but not run")


def expected_smalldocs_warning(msg: str) -> bool:
    "Whether a smalldocs warning is one the offline build expects (see `_EXPECTED_WARNING`)."
    return bool(_EXPECTED_WARNING.search(msg))


def markdown_parser():
    "smalldocs' markdown-it parser, with its maths, attributes and other extensions."
    return internal("smalldocs.markdown", "make_parser")()


def notebook_markdown(text: str) -> tuple[dict, str]:
    "A notebook's JSON text as smalldocs reads it: (front matter, markdown body)."
    return internal("smalldocs.notebook", "to_markdown")(text)


class smalldocs_mathml:
    """Make smalldocs write MathML (from `conv`, tools/mathml.py) where it writes `\\(...\\)` for KaTeX, and Unicode
    text where it takes a formula's TeX as text (tables of contents, search entries, link texts).

    smalldocs has no server-side maths: its render rules (`smalldocs.markdown.math_inline`, `math_display`,
    `math_block`, looked up by name when a parser is made) put TeX between KaTeX delimiters and load KaTeX from a CDN.
    Inside this context they write MathML and do not mark the page as having maths, so no KaTeX is loaded.
    Headings keep the identifiers Pandoc (and so Quarto) gives them, made from the TeX (`Rules.ids` runs with the
    original `plain`), and show the Unicode form (`plain` patched; the heading token's `meta['text']` and
    `env['headings']` entries updated)."""

    def __init__(self, conv):
        self.conv = conv

    def __enter__(self):
        names = ("math_inline", "math_display", "math_block", "plain")
        for n in names:
            internal("smalldocs.markdown", n)
        internal("smalldocs.markdown", "Rules.ids")
        import smalldocs.markdown as sm

        self.sm, conv = sm, self.conv
        self.saved = {n: getattr(sm, n) for n in names}
        self.saved_ids = sm.Rules.ids
        orig_plain, orig_ids = self.saved["plain"], self.saved_ids

        def math_inline(self_, tokens, idx, options, env):
            return f'<span class="math inline">{conv.mathml(tokens[idx].content.strip(), False)}</span>'

        def math_display(self_, tokens, idx, options, env):
            return f'<span class="math display">{conv.mathml(tokens[idx].content.strip(), True)}</span>'

        def math_block(self_, tokens, idx, options, env):
            return f'<p><span class="math display">{conv.mathml(tokens[idx].content.strip(), True)}</span></p>\n'

        def plain(tokens):
            out = []
            for t in tokens or []:
                if t.type == "math_inline":
                    out.append(conv.text(t.content.strip()))
                elif t.type in ("text", "code_inline"):
                    out.append(t.content)
                elif t.type in ("softbreak", "hardbreak"):
                    out.append(" ")
                elif t.type == "image":
                    out.append(plain(t.children))
            return "".join(out)

        def ids(self_, state):
            # identifiers from the TeX, as Pandoc makes them; the text shown for the heading from the Unicode form
            sm.plain = orig_plain
            try:
                orig_ids(self_, state)
            finally:
                sm.plain = plain
            by_id = {h["id"]: h for h in state.env.get("headings", [])}
            for i, t in enumerate(state.tokens):
                if t.type == "heading_open" and t.meta and "attrs" in t.meta:
                    text = plain(state.tokens[i + 1].children)
                    t.meta["text"] = text
                    if t.meta["attrs"].id in by_id:
                        by_id[t.meta["attrs"].id]["text"] = text

        sm.math_inline, sm.math_display, sm.math_block, sm.plain = math_inline, math_display, math_block, plain
        sm.Rules.ids = ids
        return self

    def __exit__(self, *exc):
        for n, f in self.saved.items():
            setattr(self.sm, n, f)
        self.sm.Rules.ids = self.saved_ids


# ------------------------------------------------------------------------------------------ smalldocs' HTML
# Each pattern below reads or patches the HTML smalldocs 0.5 writes (its markdown.py heading rule, layout.py's table
# of contents and navbar, markdown-it's links). Each function checks with a looser pattern that what it must find is
# found, and raises MarkupChanged (naming the page) when smalldocs' markup has changed shape.

# a numbered heading: `<h2 class="anchored" data-anchor-id="x"><span class="header-section-number">1.2</span> Title`
HEADING_NUMBER = re.compile(r'data-anchor-id="([^"]+)"><span class="header-section-number">([^<]+)</span>')
# a table-of-contents entry: `<a href="#x" id="toc-x" class="nav-link" data-scroll-target="#x">Title</a>`
TOC_LINK = re.compile(r'(<a href="#([^"]+)" id="toc-[^"]*" class="nav-link[^"]*"[^>]*>)(?!<span class="header-section-number">)')
_TOC_LINK_ANY = re.compile(r'<a href="#[^"]+" id="toc-[^"]*" class="nav-link')
# a heading with `{.unlisted}`: the id and classes are on the section: `<section id="x" class="level3 unnumbered unlisted">`
UNLISTED = re.compile(r'<(?:section|h[1-6]) id="([^"]+)" class="[^"]*\bunlisted\b')
# markdown-it's rendering of [`name`](page.html#anchor): `<a href="page.html#anchor"><code>name</code></a>`
CODE_LINK = re.compile(r'<a href="([^"]*#[^"]*)">(<code>[^<]*</code>)</a>')
_CODE_LINK_ANY = re.compile(r'<a\b[^>]*\bhref="[^"]*#[^"]*"[^>]*>\s*<code\b')
# a navbar entry with `icon:` and `href:` but no `text:`: smalldocs repeats the URL as its text
ICON_ONLY_NAV = re.compile(r'<a class="nav-link" href="([^"]+)">(<i class="bi [^"]+" role="img"></i>) <span class="menu-text">\1</span></a>')
_URL_AS_MENU_TEXT = re.compile(r'<span class="menu-text">(?:https?:)?//[^<]*</span>')
IMG_WITHOUT_ALT = re.compile(r"<img\b(?![^>]*\balt=)")
SEARCH_KEYS = ("href", "section", "text")  # the fields of an entry of smalldocs' search.json that the build uses


def _changed(what: str, where: str, fn: str):
    _fail("smalldocs", f"{where}: {what}", fn, MarkupChanged)


def number_toc(text: str, where: str = "") -> str:
    """Put each section's number in front of its table-of-contents entry, as Quarto does with `number-sections`.
    Reads the numbers from the headings (HEADING_NUMBER) and adds them to the entries (TOC_LINK); MarkupChanged when
    a page has numbered sections but neither pattern finds them, or has a table of contents the link pattern misses."""
    nums = dict(HEADING_NUMBER.findall(text))
    if not nums:
        if 'class="header-section-number"' in text:
            _changed("numbered headings no longer match HEADING_NUMBER", where, "number_toc")
        return text
    if 'id="toc-' in text and not _TOC_LINK_ANY.search(text):
        _changed("table-of-contents links no longer match TOC_LINK", where, "number_toc")

    import html as htmllib

    def sub(m):
        n = nums.get(htmllib.unescape(m.group(2)))
        return m.group(1) + (f'<span class="header-section-number">{n}</span> ' if n else "")

    return TOC_LINK.sub(sub, text)


def unlisted_ids(text: str, where: str = "") -> list[str]:
    """The identifiers of the `.unlisted` sections of a page (show_doc's API entries). MarkupChanged when the page
    has `unlisted` sections, or an "API reference" list, but UNLISTED finds none."""
    ids = UNLISTED.findall(text)
    if not ids and (re.search(r'class="[^"]*\bunlisted\b', text) or 'id="api-reference"' in text):
        _changed("`.unlisted` sections no longer match UNLISTED", where, "unlisted_ids")
    return ids


def rewrite_code_links(text: str, fn, where: str = "") -> str:
    """Replace each link whose text is one code span and whose target has a `#` (nbdev's doc links, the API
    reference list) by `fn(href, code_html)` (return the match's text to keep it). MarkupChanged when the page has
    such links but CODE_LINK matches none of them."""
    if not CODE_LINK.search(text) and _CODE_LINK_ANY.search(text):
        _changed("links around code spans no longer match CODE_LINK", where, "rewrite_code_links")
    return CODE_LINK.sub(lambda m: fn(m.group(1), m.group(2)), text)


def icon_only_nav_links(text: str, where: str = "") -> str:
    """Show an icon-only navbar entry (`icon: github` + `href:`, no `text:`) as Quarto does, the icon alone (with the
    URL as its label): smalldocs repeats the URL as the entry's text. MarkupChanged when the page has a URL as a
    menu text that ICON_ONLY_NAV does not match."""
    new, n = ICON_ONLY_NAV.subn(r'<a class="nav-link" href="\1" aria-label="\1">\2</a>', text)
    if len(_URL_AS_MENU_TEXT.findall(text)) > n:
        _changed("an icon-only navbar entry no longer matches ICON_ONLY_NAV", where, "icon_only_nav_links")
    return new


def add_missing_alt(text: str, alt: str) -> str:
    "Give every `<img>` without an `alt` attribute the text `alt` (smalldocs writes outputs' images without one)."
    return IMG_WITHOUT_ALT.sub(f'<img alt="{alt}"', text)


# the keys smalldocs.js gives its Fuse index; the build adds a `keywords` key (the glossary's terms of a section)
FUSE_KEYS = '{ name: "section", weight: 2 }, { name: "text", weight: 1 }]'


def add_search_keywords(js: str, weight: float, where: str = "smalldocs.js") -> str:
    """Make smalldocs' search also match each entry's `keywords` field, weighted `weight` (title and section weigh 2,
    text 1). MarkupChanged when the script no longer lists its Fuse keys as FUSE_KEYS."""
    if FUSE_KEYS not in js:
        _changed("the Fuse keys of the search script no longer match FUSE_KEYS", where, "add_search_keywords")
    return js.replace(FUSE_KEYS, FUSE_KEYS[:-1] + f', {{ name: "keywords", weight: {weight:g} }}]', 1)


def check_search_entries(entries, where: str = "search.json") -> list:
    "smalldocs' search index (a list of dicts with SEARCH_KEYS), checked; MarkupChanged when its shape changed."
    if not isinstance(entries, list) or any(not isinstance(e, dict) or "href" not in e or "text" not in e for e in entries):
        _changed(f"the search index is no longer a list of entries with {SEARCH_KEYS}", where, "check_search_entries")
    return entries
