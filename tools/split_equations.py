"""Split the display equations that are wider than the text column into lines (issue 30: no display equation may
overflow the column at 1400 px; the browser test `test_display_equations_fit_the_column` measures them).

    python tools/split_equations.py OVER.json [--skip page.html ...] [--width 740] [--dry-run]

OVER.json lists the equations that overflow, as the browser test writes it with BAYESNOTES_EQ_REPORT=OVER.json:
[{"page": "vi.html", "tex": "...", "mw": 1360}, ...] (`mw`: the equation's width in px, `tex`: MathML's TeX
annotation). Each is found in its notebook (nbdev's page name: 01_vi.ipynb -> vi.html) as a `$$ ... $$` block whose
TeX equals it up to white space, and rewritten, when it can be, as
- `\\begin{gathered}` lines when it is a list of formulas separated by top-level `\\qquad` (else `\\quad`; parts packed greedily
  into lines of at most `--width` px, a part's width estimated as its share of the TeX's length);
- `\\begin{aligned}` lines at its top-level relations (=, \\approx, \\le, ...) when it is a chain of them, every line
  after the first starting with the relation;
- with one relation and a long right-hand side, `\\begin{aligned}` lines at the sum's top-level + and -;
- a `gathered` block (one of the above, measured again) has each too-wide line split the same ways;
- otherwise (a `\\boxed{}`, another environment) it is left and reported, to be split by hand.
Top level means outside braces and `\\left ... \\right` pairs, which a line break may not cross."""
import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RELATIONS = ("\\approx", "\\leq", "\\geq", "\\le", "\\ge", "\\propto", "\\equiv", "=", "\\;=\\;", "<", ">")


def page_of(nb: Path) -> str:
    rel = nb.relative_to(ROOT / "nbs")
    return (rel.parent / (re.sub(r"^\d+[a-z]?_", "", rel.stem) + ".html")).as_posix()


def _command_at(tex: str, i: int, name: str) -> bool:
    return tex.startswith(name, i) and not tex[i + len(name):i + len(name) + 1].isalpha()


def top_level(tex: str, seps, parens: bool = False) -> list:
    """[(index, separator)] of the separators of `tex` outside braces and \\left ... \\right pairs (and, with
    `parens`, outside round and square brackets)."""
    out, depth, i = [], 0, 0
    while i < len(tex):
        if tex[i] == "\\" and i + 1 < len(tex) and not tex[i + 1].isalpha():
            i += 2          # \{ \} \\ \, ...
            continue
        if tex[i] == "{" or _command_at(tex, i, "\\left") or _command_at(tex, i, "\\begin"):
            depth += 1
        elif tex[i] == "}" or _command_at(tex, i, "\\right") or _command_at(tex, i, "\\end"):
            depth -= 1
        elif parens and tex[i] in "([":
            depth += 1
        elif parens and tex[i] in ")]":
            depth -= 1
        elif depth == 0:
            for s in seps:
                if tex.startswith(s, i) and (not s[-1].isalpha() or not tex[i + len(s):i + len(s) + 1].isalpha()):
                    out.append((i, s))
                    i += len(s) - 1
                    break
        i += 1
    return out


def pack(parts, widths, width):
    "Greedy lines of consecutive parts whose estimated widths add up to at most `width` (at least one part a line)."
    lines, cur, w = [], [], 0.0
    for p, pw in zip(parts, widths):
        if cur and w + pw > width:
            lines.append(cur)
            cur, w = [], 0.0
        cur.append(p)
        w += pw
    return lines + [cur] if cur else lines


def _cut(body, marks, keep):
    "Pieces of `body` cut at the (index, separator) `marks`; the separator starts the next piece when `keep`."
    cuts = [0] + [i for i, _ in marks] + [len(body)]
    out = []
    for k in range(len(cuts) - 1):
        seg = body[cuts[k]:cuts[k + 1]]
        if k and not keep:
            seg = seg[len(marks[k - 1][1]):]
        out.append(seg.strip())
    return [p for p in out if p]


def _binary(body, marks):
    "The + and - of `marks` that are binary operators (not a sign after an opening, a relation or a comma)."
    out = []
    for i, s in marks:
        before = body[:i].rstrip()
        if before and not before.endswith(("(", "[", "{", "=", ",", "&", "\\", "\\le", "\\ge")) and not re.search(r"\\(le|ge|leq|geq|approx|quad|qquad|;|,|!)$", before):
            out.append((i, s))
    return out


def split_line(line: str, scale: float, width: float) -> list:
    "One too-wide line of a `gathered` block as several lines: at \\qquad, \\quad, relations, then + and -."
    for seps, keep, glue in ((("\\qquad",), False, "\\qquad "), (("\\quad",), False, "\\quad "), (RELATIONS, True, " ")):
        marks = top_level(line, seps, parens=keep)
        if keep:
            marks = marks[1:]   # the first relation stays on the first line
        if marks:
            parts = _cut(line, marks, keep)
            packed = pack(parts, [len(p) * scale for p in parts], width)
            if len(packed) > 1:   # a part too wide on its own is split further
                return [x for l in packed for x in (split_line(l[0], scale, width) if len(l) == 1 and len(l[0]) * scale > width
                                                    else [glue.join(l)])]
    marks = _binary(line, top_level(line, ("+", "-"), parens=True))
    if marks:
        parts = _cut(line, marks, True)
        lines = [" ".join(l) for l in pack(parts, [len(p) * scale for p in parts], width)]
        if len(lines) > 1:
            return [lines[0]] + ["{}" + l for l in lines[1:]]
    return [line]


def split_tex(tex: str, mw: float, width: float):
    "The TeX split into lines, or None when it cannot be split here; a hand-written number `\\qquad (5)` stays at the end."
    m = re.search(r"\s*\\qquad\s*(\(\d+[a-z]?\))\s*$", tex)
    if m:
        new = _split_tex(tex[:m.start()], mw, width)
        return None if new is None else re.sub(r"\n(\\end\{\w+\})$", lambda e: f"\\qquad {m.group(1)}\n{e.group(1)}", new)
    return _split_tex(tex, mw, width)


def _split_tex(tex: str, mw: float, width: float):
    body = tex.strip()
    g = re.fullmatch(r"\\begin\{gathered\}(.*)\\end\{gathered\}", body, re.S)
    if g and "\\begin" not in g.group(1):
        lines = [l.strip() for l in re.split(r"\\\\", g.group(1)) if l.strip()]
        scale = mw / max(len(l) for l in lines)
        new = [x for l in lines for x in (split_line(l, scale, width) if len(l) * scale > width else [l])]
        return None if new == lines else "\\begin{gathered}\n" + " \\\\\n".join(new) + "\n\\end{gathered}"
    if "\\begin{" in body or "\\\\" in body or "\\tag" in body:
        return None
    scale = mw / max(len(body), 1)
    for sep in ("\\qquad", "\\quad"):   # a list of formulas: one or more of them a line
        q = top_level(body, (sep,))
        if q:
            parts = _cut(body, q, False)
            lines = pack(parts, [len(p) * scale for p in parts], width)
            if len(lines) < 2:
                return None
            return "\\begin{gathered}\n" + " \\\\\n".join((sep + " ").join(l) for l in lines) + "\n\\end{gathered}"
    r = top_level(body, RELATIONS, parens=True)
    if len(r) >= 2:
        parts = _cut(body, r[1:], True)
        lines = pack(parts, [len(p) * scale for p in parts], width)
        if len(lines) >= 2:
            out = []
            for k, l in enumerate(lines):
                s = " ".join(l)
                if k == 0:
                    i = top_level(s, RELATIONS, parens=True)[0][0]
                    out.append(s[:i].rstrip() + " &" + s[i:])
                else:
                    out.append("&" + s)
            return "\\begin{aligned}\n" + " \\\\\n".join(out) + "\n\\end{aligned}"
    if len(r) == 1:   # one relation and a long right-hand side: break the sum, continuation lines indented
        i, rel = r[0]
        lhs, rhs = body[:i].rstrip(), body[i + len(rel):].strip()
        marks = _binary(rhs, top_level(rhs, ("+", "-"), parens=True))
        if marks:
            parts = _cut(rhs, marks, True)
            lines = pack(parts, [len(p) * scale for p in parts], width - len(lhs) * scale)
            if len(lines) >= 2:
                out = [f"{lhs} &{rel} " + " ".join(lines[0])] + ["&\\quad " + " ".join(l) for l in lines[1:]]
                return "\\begin{aligned}\n" + " \\\\\n".join(out) + "\n\\end{aligned}"
    return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path)
    ap.add_argument("--skip", nargs="*", default=[], help="pages not to touch")
    ap.add_argument("--width", type=float, default=740.0, help="the width of a line, px")
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)
    over = json.loads(args.report.read_text(encoding="utf-8"))
    nbs = {page_of(p): p for p in (ROOT / "nbs").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts}
    todo = {}
    for r in over:
        if r["page"] not in args.skip:
            todo.setdefault(r["page"], []).append(r)
    left = []
    for page, rows in sorted(todo.items()):
        nb = nbs.get(page)
        if nb is None:
            left += [(page, r["tex"], "no notebook") for r in rows]
            continue
        d = json.loads(nb.read_text(encoding="utf-8"))
        changed = 0
        for r in rows:
            key = re.sub(r"\s+", "", r["tex"])
            new = split_tex(r["tex"], r["mw"], args.width)
            done = False
            for c in d["cells"]:
                if c["cell_type"] != "markdown":
                    continue
                src = "".join(c["source"])
                for m in re.finditer(r"\$\$(.+?)\$\$", src, re.S):
                    if re.sub(r"\s+", "", m.group(1)) == key:
                        if new is None:
                            break
                        src = src[:m.start(1)] + "\n" + new + "\n" + src[m.end(1):]
                        c["source"] = src.splitlines(True)
                        done = True
                        break
                if done or new is None and key in re.sub(r"\s+", "", src):
                    break
            if done:
                changed += 1
            else:
                left.append((page, r["tex"], "not split" if new is None else "not found"))
        if changed and not args.dry_run:
            nb.write_text(json.dumps(d, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"{nb.relative_to(ROOT)}: {changed} of {len(rows)} split")
    for page, tex, why in left:
        print(f"  left ({why}): {page}: {tex[:150]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
