"""TeX maths to MathML (for the pages) and to Unicode text (for titles, tables of contents and search), with pandoc.

The offline site must render its maths with no network, so nothing is typeset in the browser: pandoc (the binary
that the `pypandoc-binary` wheel ships, or a `pandoc` on PATH) converts every formula to MathML at build time, which
every current browser renders natively (Chromium since 109, Firefox, Safari). This is what Quarto does with
`html-math-method: mathml`, so both engines of tools/build_site.py give the same pages.

Conversion is batched: `prepare()` sends every formula of the site to one pandoc process (a JSON document whose
paragraphs are the formulas, so no delimiter or escaping can go wrong) and caches the results; `mathml()` and
`text()` then look them up (an unprepared formula costs one pandoc call).
"""
from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

# old-style font switches that pandoc's TeX reader (texmath) rejects: `{\rm in}` -> `\mathrm{in}`
_FONT_SWITCH = re.compile(r"\{\\(rm|bf|it|sf|tt|cal)\s+([^{}]*)\}")
_FONT_CMD = {"rm": "mathrm", "bf": "mathbf", "it": "mathit", "sf": "mathsf", "tt": "mathtt", "cal": "mathcal"}
_SEP = "BNMATHSEP"


def pandoc_path() -> str:
    "The pandoc binary: the one the pypandoc-binary wheel ships, else `pandoc` on PATH."
    try:
        import pypandoc

        p = pypandoc.get_pandoc_path()
        if p and Path(p).exists():
            return str(p)
    except (ImportError, OSError):
        pass
    p = shutil.which("pandoc")
    if p:
        return p
    raise RuntimeError("no pandoc: install the pypandoc-binary wheel (it is in settings.ini dev_requirements)")


def normalise(tex: str) -> str:
    "Rewrite TeX that pandoc cannot read into what it can (`{\\rm x}` -> `\\mathrm{x}`); the page keeps the original."
    return _FONT_SWITCH.sub(lambda m: f"\\{_FONT_CMD[m.group(1)]}{{{m.group(2).strip()}}}", tex)


class MathConverter:
    "Convert TeX formulas with pandoc, in batches, with a cache."

    def __init__(self, pandoc: str | None = None):
        self.pandoc = pandoc or pandoc_path()
        self._api = None
        self._mathml: dict = {}  # (tex, display) -> MathML
        self._text: dict = {}  # tex -> Unicode text
        self.failed: list = []  # TeX that pandoc could not convert (left as TeX on the page)

    # ------------------------------------------------------------------ pandoc
    def _run(self, args, stdin: str) -> str:
        r = subprocess.run([self.pandoc, *args], input=stdin, capture_output=True, text=True, encoding="utf-8")
        if r.returncode:
            raise RuntimeError(f"pandoc failed ({r.returncode}): {r.stderr[-2000:]}")
        return r.stdout

    def api_version(self):
        if self._api is None:
            self._api = json.loads(self._run(["-f", "markdown", "-t", "json"], ""))["pandoc-api-version"]
        return self._api

    def _doc(self, items):
        "A pandoc JSON document: one paragraph per formula, each followed by a separator paragraph."
        blocks = []
        for i, (tex, display) in enumerate(items):
            kind = "DisplayMath" if display else "InlineMath"
            blocks.append({"t": "Para", "c": [{"t": "Math", "c": [{"t": kind}, normalise(tex)]}]})
            blocks.append({"t": "Para", "c": [{"t": "Str", "c": f"{_SEP}{i}"}]})
        return json.dumps({"pandoc-api-version": self.api_version(), "meta": {}, "blocks": blocks})

    @staticmethod
    def _split(out: str, n: int, para: bool) -> list[str]:
        parts = re.split(rf"(?:<p>)?{_SEP}(\d+)(?:</p>)?\n?", out)
        got = {int(parts[k + 1]): parts[k] for k in range(0, len(parts) - 1, 2)}
        res = []
        for i in range(n):
            s = got.get(i, "").strip()
            if para:
                s = re.sub(r"^<p>(.*)</p>$", r"\1", s, flags=re.S).strip()
            res.append(s)
        return res

    # ------------------------------------------------------------------ public
    def _convert(self, todo) -> None:
        "MathML for the (tex, display) pairs not converted yet, in one pandoc call."
        todo = list(dict.fromkeys(f for f in todo if f not in self._mathml))
        if not todo:
            return
        out = self._run(["-f", "json", "-t", "html", "--mathml", "--wrap=none"], self._doc(todo))
        for (tex, display), m in zip(todo, self._split(out, len(todo), True)):
            if "<math" not in m:
                self.failed.append(tex)
                m = html.escape(f"\\[{tex}\\]" if display else f"\\({tex}\\)")
            self._mathml[(tex, display)] = m

    def prepare(self, formulas) -> None:
        "Convert many formulas at once: an iterable of (tex, display) pairs (at most three pandoc calls)."
        formulas = [(t, bool(d)) for t, d in formulas]
        self._convert(formulas)
        texts = list(dict.fromkeys(t for t, _ in formulas if t not in self._text))
        if texts:
            out = self._run(["-f", "json", "-t", "plain", "--wrap=none"], self._doc([(t, False) for t in texts]))
            plain = {tex: tidy_scripts(" ".join(s.split())) for tex, s in zip(texts, self._split(out, len(texts), False))}
            # pandoc's plain writer had no Unicode form: linearise the inline MathML (converted in one batch)
            linearise = [t for t, s in plain.items() if not s or "$" in s or "\\" in s]
            self._convert((t, False) for t in linearise)
            for tex in linearise:
                plain[tex] = mathml_to_text(self._mathml[(tex, False)]) or tex
            self._text.update(plain)

    def mathml(self, tex: str, display: bool = False) -> str:
        "The MathML of one formula (a `<math>` element with the TeX as its annotation)."
        key = (tex, bool(display))
        if key not in self._mathml:
            self.prepare([key])
        return self._mathml[key]

    def text(self, tex: str) -> str:
        "The formula as Unicode text, e.g. `\\widehat{R}` -> 'R̂', `\\alpha` -> 'α' (TeX where pandoc has no text)."
        if tex not in self._text:
            self.prepare([(tex, False)])
        return self._text[tex]


# pandoc's plain writer brackets every script it has no Unicode character for: `\alpha_k` -> 'α_(k)',
# `z^{(j)}` -> 'z^((j))'. A script of letters only, of digits only, or already in brackets needs none, unless a
# letter or digit follows, which would read as part of it: 'x_(n)y' and 'x^(2n)' stay.
_BRACKETED_SCRIPT = re.compile(r"([_^])\(([^\W\d_]+|\d+|\([^()\s]*\))\)(?!\w)")


def tidy_scripts(text: str) -> str:
    "Drop the brackets pandoc's plain text puts round a simple script: 'α_(k)' -> 'α_k', 'z^((j))' -> 'z^(j)'."
    return _BRACKETED_SCRIPT.sub(r"\1\2", text)


def mathml_to_text(mathml: str) -> str:
    "A linear text form of presentation MathML, for search entries: fractions as (a)/(b), scripts as a_b and a^b."
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(mathml)
    except ET.ParseError:
        return ""

    def tag(e):
        return e.tag.rsplit("}", 1)[-1]

    def group(s):
        return s if len(s) <= 1 or re.fullmatch(r"\w+|\(.*\)", s) else f"({s})"

    def walk(e) -> str:
        t, kids = tag(e), list(e)
        if t == "annotation" or t == "annotation-xml":
            return ""
        if t in ("mi", "mn", "mo", "mtext", "ms"):
            return (e.text or "").strip() if t != "mtext" else (e.text or "")
        if t == "mspace":
            return " "
        parts = [walk(k) for k in kids]
        if t == "mfrac" and len(parts) == 2:
            return f"{group(parts[0])}/{group(parts[1])}"
        if t == "msqrt":
            return f"√{group(''.join(parts))}"
        if t == "mroot" and len(parts) == 2:
            return f"{group(parts[1])}√{group(parts[0])}"
        if t == "msub" and len(parts) == 2:
            return f"{parts[0]}_{group(parts[1])}"
        if t == "msup" and len(parts) == 2:
            return f"{parts[0]}^{group(parts[1])}"
        if t == "msubsup" and len(parts) == 3:
            return f"{parts[0]}_{group(parts[1])}^{group(parts[2])}"
        if t == "mover" and len(parts) == 2:
            accent = parts[1]
            return parts[0] + accent if len(accent) == 1 and 0x300 <= ord(accent) < 0x370 else f"{parts[0]}^{group(accent)}"
        if t == "munder" and len(parts) == 2:
            return f"{parts[0]}_{group(parts[1])}"
        if t == "munderover" and len(parts) == 3:
            return f"{parts[0]}_{group(parts[1])}^{group(parts[2])}"
        if t == "mtr":
            return " ".join(p for p in parts if p)
        if t == "mtable":
            return "; ".join(p for p in parts if p)
        return "".join(parts)

    return " ".join(re.sub("[\u2061-\u2064]", " ", walk(root)).split())


# math in HTML that no Markdown renderer saw (raw HTML blocks, e.g. a reference list): KaTeX-style delimiters
_HTML_MATH = re.compile(r'<span class="math (inline|display)">\\([(\[])(.*?)\\([)\]])</span>', re.S)


def html_math_spans(text: str) -> list[tuple[str, bool]]:
    "The formulas of `<span class=\"math inline\">\\(...\\)</span>` spans in HTML, as (tex, display)."
    return [(html.unescape(m.group(3)), m.group(1) == "display") for m in _HTML_MATH.finditer(text)]


def convert_html_math(text: str, conv: MathConverter) -> str:
    "Replace `<span class=\"math ...\">\\(...\\)</span>` spans in HTML with MathML."
    def sub(m):
        display = m.group(1) == "display"
        return f'<span class="math {m.group(1)}">{conv.mathml(html.unescape(m.group(3)), display)}</span>'

    return _HTML_MATH.sub(sub, text)


_INLINE_DOLLARS = re.compile(r"(?<![\\$])\$(?=\S)([^$\n]+?)(?<=\S)\$(?!\d)")


def inline_formulas(s: str) -> list[str]:
    "The TeX of the `$...$` formulas in text, as `tex_to_text` finds them (to convert them in one batch first)."
    return [m.group(1) for m in _INLINE_DOLLARS.finditer(s)]


def tex_to_text(s: str, conv: MathConverter) -> str:
    "Text with `$...$` maths (e.g. a title) as plain Unicode text."
    return _INLINE_DOLLARS.sub(lambda m: conv.text(m.group(1)), s)
