"""What turns nbdev's processed notebooks into book pages; both site engines of tools/build_site.py apply it.

These run after nbdev's doc processors (so on what `nbdev_docs` would hand to Quarto) and change only the staged
copies of the notebooks, never nbs/:

- cells tagged `remove-cell` (Jupyter Book's and Quarto's tag) are dropped: maintainer material such as the
  "regenerate the figures" sections (tools/tag_cells.py tags them);
- the code of `#| export` cells is folded ("Exported source", closed; nbdev leaves it open);
- the `SEED = int(os.environ.get("BAYESNOTES_SEED", 0))` setup cell atop every chapter is dropped (it has no output);
- warnings printed on stderr (a deliberate bad-input demonstration, with the build machine's paths in them) are
  dropped from outputs when the site sets `execute: warning: false`, as Quarto does for the cells it runs;
- headings numbered by hand (`## 2. Mean field`) lose their number when the site sets `number-sections: true`,
  so Quarto's numbers are the only ones (identifiers do not change: Pandoc starts them at the first letter);
- show_doc's API headings become `.unnumbered .unlisted`, so the table of contents holds the prose sections, and
  an "API reference" section at the end of the page lists every documented name with its one-line summary, followed
  by the signatures themselves (moved out of the chapter's sections, which open with prose).
"""
from __future__ import annotations

import re

import compat  # nbdev's markup (show_doc, `#| exports` folding) is read through tools/compat.py

_WARNING_LINE = re.compile(r"^\S.*?:\d+: \w*Warning: ")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_NUMBERED = re.compile(r"^(#{2,6})[ \t]+(?:\d+(?:\.\d+)*\.?|[A-Z]\.)[ \t]+(?=\S)")


def _src(cell) -> str:
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else (s or "")


def _tags(cell) -> set:
    return set(((cell.get("metadata") or {}).get("tags")) or [])


def drop_removed_cells(nb) -> int:
    "Drop cells tagged `remove-cell`; return how many."
    keep = [c for c in nb.cells if "remove-cell" not in _tags(c)]
    n = len(nb.cells) - len(keep)
    nb.cells[:] = keep
    return n


_SEED_CELL = re.compile(r'\s*import os\s*\n\s*SEED = int\(os\.environ\.get\("BAYESNOTES_SEED", 0\)\)[ \t]*(#[^\n]*)?(\s*#[^\n]*)*\s*')


def drop_seed_cells(nb) -> int:
    """Drop the setup cell `import os; SEED = int(os.environ.get("BAYESNOTES_SEED", 0))` (with its comment, and no
    output) that every chapter runs first: a reader of the page does not run it, and it stood atop every chapter."""
    keep = [c for c in nb.cells if not (c.get("cell_type") == "code" and _SEED_CELL.fullmatch(_src(c))
                                        and not c.get("outputs"))]
    n = len(nb.cells) - len(keep)
    nb.cells[:] = keep
    return n


def fold_exported_source(nb):
    "nbdev shows `#| exports` code open (`code-fold: show`); fold it closed."
    for c in nb.cells:
        if c.get("cell_type") == "code":
            s = _src(c)
            if compat.EXPORTS_FOLD_OPEN in s and compat.EXPORTS_SUMMARY in s:
                c["source"] = s.replace(compat.EXPORTS_FOLD_OPEN, "#| code-fold: true", 1)


def strip_warnings(text: str) -> str:
    """Remove Python warnings (`path:line: XWarning: message` and the indented source line after it) from stderr text."""
    out, skip = [], False
    for line in text.splitlines(True):
        if _WARNING_LINE.match(line):
            skip = True
            continue
        if skip and line.startswith((" ", "\t")):
            continue
        skip = False
        out.append(line)
    return "".join(out)


def drop_warnings(nb) -> int:
    "Drop warnings from the stderr outputs of every code cell; return how many outputs changed."
    n = 0
    for c in nb.cells:
        if c.get("cell_type") != "code":
            continue
        outs = []
        for o in c.get("outputs") or []:
            if o.get("output_type") == "stream" and o.get("name") == "stderr":
                text = "".join(o["text"]) if isinstance(o.get("text"), list) else (o.get("text") or "")
                new = strip_warnings(text)
                if new != text:
                    n += 1
                    if not new.strip():
                        continue
                    o["text"] = new
            outs.append(o)
        c["outputs"] = outs
    return n


def _headings(md: str):
    "The (line index, line) of the ATX headings of markdown text, outside fenced code."
    fence = None
    for i, line in enumerate(md.split("\n")):
        m = _FENCE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)[0] * len(m.group(1))
            elif line.strip().startswith(fence):
                fence = None
            continue
        if fence is None and re.match(r"^#{1,6}[ \t]", line):
            yield i, line


def strip_manual_numbers(nb) -> int:
    "`## 2. Mean field` -> `## Mean field` in markdown cells (Quarto numbers the sections); return how many."
    n = 0
    for c in nb.cells:
        if c.get("cell_type") != "markdown":
            continue
        lines = _src(c).split("\n")
        changed = False
        for i, line in _headings("\n".join(lines)):
            new = _NUMBERED.sub(r"\1 ", line)
            if new != line:
                lines[i], changed = new, True
                n += 1
        if changed:
            c["source"] = "\n".join(lines)
    return n


def pandoc_id(text: str) -> str:
    "A heading's identifier by Pandoc's rules (lower case, punctuation dropped, spaces to hyphens, from the first letter)."
    kept = "".join(ch.lower() for ch in text if ch.isalnum() or ch.isspace() or ch in "_-.")
    out = "-".join(kept.split())
    i = next((i for i, ch in enumerate(out) if ch.isalpha()), len(out))
    return out[i:] or "section"


def _heading_text(md: str) -> str:
    "Roughly Pandoc's plain text of a heading's inline markdown: markup and link targets dropped, TeX kept."
    md = re.sub(r"\{[^{}]*\}\s*$", "", md)  # trailing attributes
    md = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", md)
    md = re.sub(r"`+([^`]*)`+", r"\1", md)
    md = re.sub(r"\$([^$]*)\$", r"\1", md)
    md = re.sub(r"(?<!\w)([*_]{1,3})(?=\S)(.+?)(?<=\S)\1(?!\w)", r"\2", md)  # emphasis, not snake_case
    return md.strip().strip("#").strip()


def _showdoc_md(c):
    "The text/markdown output of a show_doc cell, or None."
    if c.get("cell_type") != "code" or not re.search(r"^show_doc\(", _src(c), re.M):
        return None
    for o in c.get("outputs") or []:
        md = (o.get("data") or {}).get("text/markdown")
        if md is not None:
            return o
    return None


def api_reference(nb, title: str = "API reference") -> list:
    """Make show_doc headings `.unnumbered .unlisted` and append an API reference section listing them (name, link,
    one-line summary), followed by the show_doc cells themselves, moved there from the body of the page (issue 30:
    API signatures before the prose buried it; each name's link in the list still leads to its signature).
    Returns [(name, id, summary)]."""
    used, entries, moved = set(), [], set()

    def take(text):
        base = ident = pandoc_id(text)
        k = 0
        while ident in used:
            k += 1
            ident = f"{base}-{k}"
        used.add(ident)
        return ident

    for c in nb.cells:
        if c.get("cell_type") == "markdown":
            for _, line in _headings(_src(c)):
                m = re.match(r"^#+\s+(.*?)\s*(\{#([^\s}]+)[^}]*\})?\s*$", line)
                if m:
                    if m.group(3):
                        used.add(m.group(3))
                    else:
                        take(_heading_text(m.group(1)))
            continue
        o = _showdoc_md(c)
        if o is None:
            continue
        md = o["data"]["text/markdown"]
        md = "".join(md) if isinstance(md, list) else md
        m = compat.showdoc_heading(md, "show_doc output")
        if not m:
            continue
        name = m.group(2).strip()
        ident = take(name)
        entries.append((name, ident, compat.showdoc_summary(md[m.end():])))
        moved.add(id(c))
        o["data"]["text/markdown"] = md[:m.start()] + f"{m.group(1)} {name} {{.unnumbered .unlisted}}" + md[m.end():]
    if entries:
        rows = "\n".join(f"- [`{n}`](#{i})" + (f": {s}" if s else "") for n, i, s in entries)
        # the signatures follow the list: a section of the chapter opens with its prose, not with show_doc blocks
        docs = [c for c in nb.cells if id(c) in moved]
        nb.cells[:] = [c for c in nb.cells if id(c) not in moved]
        nb.cells.append(compat.mk_cell(f"## {title} {{.unnumbered}}\n\n{rows}\n", "markdown"))
        nb.cells.extend(docs)
    return entries


def book_pages(nb, number_sections: bool = False, warnings: bool = True) -> dict:
    "All of the above on one processed notebook; returns counts for the build log."
    fold_exported_source(nb)
    out = {"warnings dropped": 0 if warnings else drop_warnings(nb)}
    out["seed cells dropped"] = drop_seed_cells(nb)
    out["section numbers stripped"] = strip_manual_numbers(nb) if number_sections else 0
    out["api entries"] = len(api_reference(nb))
    return out


# ------------------------------------------------------------------------------------------ cross-references
# Quarto numbers figures (`#| label: fig-x` with `#| fig-cap:`) and equations (`$$ ... $$ {#eq-x}`) and resolves
# `@fig-x` / `@eq-x`; smalldocs does neither, so the offline build does it here, in Quarto's words.
# The maths may not contain `$$`: an unlabelled display earlier in the cell must not swallow the labelled one.
_EQ = re.compile(r"\$\$((?:(?!\$\$).)+?)\$\$[ \t]*\{#(eq-[\w-]+)\}", re.S)
_REF = re.compile(r"(?<![\w@.\-`/])(\[?)-?@((?:fig|eq)-[\w-]*\w)(\]?)")


def _set_option(cell, key: str, value: str):
    "Set one `#| key: value` option of a code cell (replacing it when present)."
    import json

    lines = _src(cell).split("\n")
    line = f"#| {key}: {json.dumps(value, ensure_ascii=False)}"
    k = 0
    while k < len(lines) and re.match(r"^\s*#\s*\|", lines[k]):
        if re.match(rf"^\s*#\s*\|\s*{re.escape(key)}\s*:", lines[k]):
            lines[k] = line
            cell["source"] = "\n".join(lines)
            return
        k += 1
    lines.insert(k, line)
    cell["source"] = "\n".join(lines)


def crossrefs(nb, text=None) -> dict:
    """Number the figures and equations of a page and resolve references to them, as Quarto does:
    captions become "Figure 2: ...", equations get "(3)" at the right, `@fig-x` becomes a link "Figure 2".
    `text(s)` turns maths in a caption into plain text (smalldocs writes captions as text). Returns {label: text}."""
    import yaml

    found, nfig, neq = {}, 0, 0
    for c in nb.cells:
        if c.get("cell_type") != "code":
            continue
        opts = {}
        for line in _src(c).split("\n"):
            if not re.match(r"^\s*#\s*\|", line):
                break
            try:
                d = yaml.safe_load(re.sub(r"^\s*#\s*\|\s*", "", line))
            except yaml.YAMLError:
                continue
            if isinstance(d, dict):
                opts.update(d)
        label = str(opts.get("label") or "")
        if label.startswith("fig-"):
            nfig += 1
            found[label] = f"Figure {nfig}"
            cap = opts.get("fig-cap")
            cap = str(cap) if isinstance(cap, str) else ""
            if text is not None and "$" in cap:
                cap = text(cap)
            _set_option(c, "fig-cap", f"Figure {nfig}: {cap}" if cap else f"Figure {nfig}")
    for c in nb.cells:
        if c.get("cell_type") != "markdown":
            continue

        def eq(m):
            nonlocal neq
            neq += 1
            found[m.group(2)] = f"Equation {neq}"
            # the number sits beside the maths, outside its box: a wide equation scrolls and keeps its number in view
            return (f'\n\n<div id="{m.group(2)}" class="bn-eq">\n\n$${m.group(1).rstrip()}$$\n\n'
                    f'<span class="bn-eqno">({neq})</span>\n\n</div>\n\n')

        c["source"] = _EQ.sub(eq, _src(c))
    if not found:
        return found
    from citations import _PROTECT

    for c in nb.cells:
        if c.get("cell_type") != "markdown":
            continue
        s, out, pos = _src(c), [], 0
        for m in _PROTECT.finditer(s):
            out += [(False, s[pos:m.start()]), (True, m.group(0))]
            pos = m.end()
        out.append((False, s[pos:]))

        def ref(m):
            label = m.group(2)
            if label not in found:
                return m.group(0)
            paired = bool(m.group(1) and m.group(3))  # `[@fig-x]` reads as `@fig-x`
            return f"{'' if paired else m.group(1)}[{found[label]}](#{label}){'' if paired else m.group(3)}"

        c["source"] = "".join(t if prot else _REF.sub(ref, t) for prot, t in out)
    return found


def set_front_matter(nb, **options) -> bool:
    "Set options in the notebook's front matter (the raw `---` cell nbdev makes from the title); False if it has none."
    import yaml

    for c in nb.cells:
        s = _src(c)
        if c.get("cell_type") == "raw" and s.lstrip().startswith("---"):
            m = re.match(r"\s*---\s*\n(.*?)\n---\s*", s, re.S)
            fm = (yaml.safe_load(m.group(1)) if m else None) or {}
            if not isinstance(fm, dict):
                return False
            fm.update(options)
            c["source"] = "---\n" + yaml.safe_dump(fm, sort_keys=False, allow_unicode=True) + "---\n"
            return True
    return False
