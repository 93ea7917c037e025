"""Quarto-style citations for the offline site and the README, formatted by pybtex.

smalldocs has no bibliography support, so `tools/build_site.py` resolves the citations of each markdown cell
here before smalldocs renders the page:

- `[@key]`, `[@key, sec. 3]`, `[see @a, p. 2; @b]` -> "(Murphy 2023, sec. 3)" linked to the entry;
- `[-@key]` -> "(2023)" (author suppressed);
- bare `@key` -> "Murphy (2023)", only when `key` is in the .bib (so e-mail addresses and decorators are safe).

Code spans, fenced code and maths are never touched. The reference list is pybtex's `plain` style rendered
with its HTML backend (or its markdown backend for the README); only the in-text author-year label is built
here, from pybtex's parsed person names. Maths in the .bib (`{$\\widehat{R}$}` in a title) is kept out of pybtex's
hands and comes back as a maths span (HTML, which the site turns into MathML) or as `$...$` (markdown).

Why some of this is hand code (checked for issue 15 against pybtex 0.26 and citeproc-py 0.11): pybtex, a maintained
library, does the parsing of the .bib, the names and the reference list (with DOI links). What is written here is
what no maintained Python library does for this build: finding Quarto/Pandoc citation syntax in markdown that
smalldocs (markdown-it), not pandoc, renders, and the author-year label, since pybtex's label styles are only
`number` and `alpha`. citeproc-py (CSL, author-date styles) was tried as a replacement and loses features: its
BibTeX reader drops the braces of maths in titles (`$\\widehat{R}$` -> `$\\widehatR$`), its bibliography prints DOIs
as text, not links, it ships one CSL style (another package for the others), and it parses no citation syntax
either, so the scanner below would stay. pandoc's `--citeproc` (what Quarto runs) would need each page rendered by
pandoc instead of smalldocs, and would change every reference list to Chicago author-date.
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from pathlib import Path

from pybtex.database import parse_string
from pybtex.plugin import find_plugin
from pybtex.richtext import Text

KEY = r"[A-Za-z0-9_](?:[\w:.#$%&+?<>~/-]*[\w])?"
_BRACKET = re.compile(r"(?<![!\]\\])\[([^\[\]]*?-?@" + KEY + r"[^\[\]]*?)\](?![(\[{:])")
_PART = re.compile(r"^(?P<pre>.*?)(?P<minus>-?)@(?P<key>" + KEY + r")(?P<post>.*)$", re.S)
_BARE = re.compile(r"(?<![\w@.\-`/])@(?P<key>" + KEY + r")")
# what citations must not touch: fenced code, inline code, display and inline maths, raw HTML tags, link targets
_PROTECT = re.compile(
    r"(?ms)^[ \t]*(`{3,}|~{3,}).*?^[ \t]*\1[ \t]*$"  # fenced code block
    r"|(`+).+?\2"  # inline code
    r"|\$\$.+?\$\$"  # display maths
    r"|(?<![\\$])\$(?=\S)[^$\n]+?(?<=\S)\$(?!\d)"  # inline maths
    r"|<[^>\n]+>"  # an HTML tag or autolink
    r"|\]\([^)\s]*\)"  # a link target
)


def strip_bib_comments(text: str) -> str:
    "Drop `%` comment lines: BibTeX parsers read an `@` in a comment as the start of an entry."
    return re.sub(r"(?m)^[ \t]*%.*$", "", text)


_MATH = re.compile(r"(?<!\\)\$([^$]+?)(?<!\\)\$")
_PLACEHOLDER = re.compile(r"XBNMATH(\d+)X", re.I)


def protect_math(text: str) -> tuple[str, list]:
    """Replace each `$...$` of a .bib text by a placeholder that pybtex passes through untouched (pybtex reads the
    braces inside maths as BibTeX groups and changes case outside them): `$\\widehat{R}$` -> `{XBNMATH0X}`.
    Returns the text and the formulas; `restore_math` puts them back into formatted output."""
    found = []

    def sub(m):
        found.append(m.group(1))
        return "{XBNMATH%dX}" % (len(found) - 1)

    return _MATH.sub(sub, text), found


def restore_math(text: str, math: list, fmt: str) -> str:
    "Put the formulas back: `html` as `<span class=\"math inline\">\\(tex\\)</span>` (the site converts it), else `$tex$`."
    def sub(m):
        tex = math[int(m.group(1))]
        return f'<span class="math inline">\\({html.escape(tex)}\\)</span>' if fmt == "html" else f"${tex}$"

    return _PLACEHOLDER.sub(sub, text)


_BACKENDS: dict = {}


def _backend(name: str):
    "A pybtex output backend, found once (pybtex's plugin lookup scans every installed package's entry points)."
    if name not in _BACKENDS:
        _BACKENDS[name] = find_plugin("pybtex.backends", name)()
    return _BACKENDS[name]


def _latex_text(s: str, math: list | None = None) -> str:
    return restore_math(Text.from_latex(s).render(_backend("text")), math or [], "markdown")


@dataclass
class Cited:
    "What one piece of markdown cited."
    keys: list = field(default_factory=list)  # known keys, in order of first citation
    unknown: list = field(default_factory=list)  # keys not in the bibliography


class Bibliography:
    "A .bib file read by pybtex, which resolves Quarto citations in markdown and renders reference lists."

    def __init__(self, path, style: str = "plain"):
        self.path = Path(path)
        text, self.math = protect_math(strip_bib_comments(self.path.read_text(encoding="utf-8")))
        self.data = parse_string(text, "bibtex")
        self.style = find_plugin("pybtex.style.formatting", style)()
        self.keys = {k.lower(): k for k in self.data.entries.keys()}

    # ---------------------------------------------------------------- in-text labels
    def _entry(self, key):
        return self.data.entries[self.keys[key.lower()]]

    def authors(self, key: str) -> str:
        "Author part of an author-year label: 'Murphy', 'Kingma and Ba', 'Cinelli et al.'."
        e = self._entry(key)
        people = e.persons.get("author") or e.persons.get("editor") or []
        names = [_latex_text(" ".join(p.prelast_names + p.last_names)) for p in people]
        if not names:
            return _latex_text(e.fields.get("organization", e.fields.get("title", key)), self.math)
        if len(names) == 1:
            return names[0]
        if len(names) == 2:
            return f"{names[0]} and {names[1]}"
        return f"{names[0]} et al."

    def year(self, key: str) -> str:
        return _latex_text(self._entry(key).fields.get("year", "n.d."))

    def known(self, key: str) -> bool:
        return key.lower() in self.keys

    # ---------------------------------------------------------------- markdown
    def _link(self, key, text, fmt):
        if fmt == "html":
            return f'<a href="#ref-{self.keys[key.lower()]}" class="citation" role="doc-biblioref">{html.escape(text)}</a>'
        return text

    def _group(self, inner: str, cited: Cited, fmt: str):
        "Render the inside of `[...]`, or None when it is not a citation."
        parts = []
        for raw in inner.split(";"):
            m = _PART.match(raw.strip())
            if not m:
                return None
            parts.append(m)
        out = []
        for m in parts:
            key, pre, post = m["key"], m["pre"].strip(), m["post"].strip()
            post = post[1:].strip() if post.startswith(",") else post
            if not self.known(key):
                cited.unknown.append(key)
                out.append(f"{pre} **?{key}**".strip() if fmt == "markdown" else f"{html.escape(pre)} <strong>?{html.escape(key)}</strong>".strip())
                continue
            if key not in cited.keys:
                cited.keys.append(self.keys[key.lower()])
            label = self.year(key) if m["minus"] else f"{self.authors(key)} {self.year(key)}"
            if post:
                label += f", {post}"
            linked = self._link(key, label, fmt)
            out.append(f"{html.escape(pre) if fmt == 'html' else pre} {linked}".strip())
        return "(" + "; ".join(out) + ")"

    def cite(self, md: str, fmt: str = "html") -> tuple[str, Cited]:
        """Replace the citations in markdown text. `fmt='html'` links each citation to `#ref-<key>` (for the
        site); `fmt='markdown'` writes plain text (for the README). Returns the new text and what was cited."""
        cited = Cited()
        chunks, pos = [], 0
        for m in _PROTECT.finditer(md):
            chunks.append((False, md[pos:m.start()]))
            chunks.append((True, m.group(0)))
            pos = m.end()
        chunks.append((False, md[pos:]))

        def bracket(m):
            r = self._group(m.group(1), cited, fmt)
            return m.group(0) if r is None else r

        def bare(m):
            key = m["key"]
            if not self.known(key):
                return m.group(0)
            if self.keys[key.lower()] not in cited.keys:
                cited.keys.append(self.keys[key.lower()])
            return self._link(key, f"{self.authors(key)} ({self.year(key)})", fmt)

        out = []
        for protected, text in chunks:
            if not protected:
                text = _BARE.sub(bare, _BRACKET.sub(bracket, text))
            out.append(text)
        return "".join(out), cited

    # ---------------------------------------------------------------- reference lists
    def formatted(self, keys):
        "pybtex's formatted entries for `keys`, sorted by its style (author, year, title)."
        return list(self.style.format_bibliography(self.data, citations=list(keys)))

    def references_html(self, keys) -> str:
        "The reference list as HTML, one `div#ref-<key>` per entry, in the markup Quarto uses."
        backend = _backend("html")
        rows = [f'<div id="ref-{e.key}" class="csl-entry">{restore_math(e.text.render(backend).replace(chr(10), " "), self.math, "html")}</div>'
                for e in self.formatted(keys)]
        return '<div id="refs" class="references csl-bib-body" role="list">\n' + "\n".join(rows) + "\n</div>"

    def references_markdown(self, keys) -> str:
        "The reference list as markdown, one paragraph per entry."
        backend = _backend("markdown")
        return "\n\n".join(restore_math(e.text.render(backend).replace("\n", " "), self.math, "markdown") for e in self.formatted(keys))
