"""The chapters' notation tables against each other and against the book-wide table of nbs/notation.ipynb (issue 30,
item 6 "One notation").

A *notation table* is a markdown table under a heading whose text contains "Notation": an ATX heading
(`### Notation {.unnumbered}`, in force until the next heading of the same or a higher level, across cells) or a
paragraph that is only a bold run (`**Notation.**`, in force until the next heading or the end of its cell). Its
symbol column is the one headed "symbol" (else the first), its meaning column the first headed "meaning" or "here"
(else the second). A column headed "elsewhere ..." (as in chapter 2's table) lists other meanings of the same letters
as `$\\alpha$: the power of power EP; ...`: each `$symbol$: meaning` item there counts as a further meaning.

For every chapter notebook `nbs/[0-9]*.ipynb` the script prints the symbols its tables define, and reports
(a) a symbol given two different meanings within one notebook's tables (`clashes`), and
(b) a symbol whose meaning differs from the book-wide table (`compare_with_book`): "specific" when the two share
    some content words (a chapter may say more than the book-wide table), "different" when they share none (plainly
    different ideas), "missing" when the book-wide table does not list the symbol at all.

    python tools/notation.py            # the report
    python tools/notation.py --check    # also exit 1 on a clash (a) or a plainly different meaning (b)

Nothing is executed and nothing is written; tests/test_notation.py calls the functions.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / "nbs"
BOOK_PAGE = NBS / "notation.ipynb"

_ATX = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
_BOLD_LINE = re.compile(r"^\*\*([^*]+)\*\*\s*$")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_MATH = re.compile(r"\$([^$]+)\$")
_LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]+)\)")
_STOP = set("""a an and are as at be by for from in into is it its of on or that the this to with without which
whose when where here their there these those each every one two its than then so not no any all only own same other
also used uses use see e.g i.e per""".split())


@dataclass(frozen=True)
class Entry:
    "One meaning of one symbol in one notation table."
    symbol: str     # normalised key (`symbol_key`): whitespace, braces around one token and arguments dropped
    display: str    # the symbol as the table writes it, without the dollars
    meaning: str    # the meaning cell (or the `elsewhere` item), whitespace collapsed
    notebook: str   # file name, e.g. "04_mcmc.ipynb"
    cell: int       # index of the markdown cell that holds the table row
    kind: str = "main"  # "main" (the meaning column) or "elsewhere" (an item of an "elsewhere" column)


@dataclass
class Table:
    "A markdown table found under a notation heading."
    notebook: str
    cell: int
    heading: str
    header: list
    rows: list      # list of lists of cell strings


def _src(cell) -> str:
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else (s or "")


def markdown_cells(path: Path) -> list[tuple[int, str]]:
    "(cell index, source) of the markdown cells of a notebook."
    cells = json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
    return [(i, _src(c)) for i, c in enumerate(cells) if c.get("cell_type") == "markdown"]


def split_row(line: str) -> list[str]:
    "The cells of one markdown table row (outer pipes optional; `\\|` and pipes inside `$...$` or backticks kept)."
    s = line.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|") and not s.endswith("\\|"):
        s = s[:-1]
    out, cur, math, code, i = [], [], False, False, 0
    while i < len(s):
        ch = s[i]
        if ch == "\\" and i + 1 < len(s):
            cur.append(s[i:i + 2])
            i += 2
            continue
        if ch == "`" and not math:
            code = not code
        elif ch == "$" and not code:
            math = not math
        if ch == "|" and not math and not code:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
        i += 1
    out.append("".join(cur).strip())
    return out


def _is_separator(cells: list[str]) -> bool:
    return bool(cells) and all(re.fullmatch(r":?-{3,}:?", c.strip()) for c in cells)


def parse_tables(md: str) -> list[tuple[int, list[str], list[list[str]]]]:
    "Every pipe table of markdown text outside fenced code: (line index of its header, header cells, body rows)."
    lines, out, fence, i = md.split("\n"), [], None, 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m:
            tok = m.group(1)
            fence = None if fence and lines[i].strip().startswith(fence) else (fence or tok[0] * len(tok))
            i += 1
            continue
        if fence is None and lines[i].lstrip().startswith("|") and i + 1 < len(lines) \
                and _is_separator(split_row(lines[i + 1])):
            header, rows, j = split_row(lines[i]), [], i + 2
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                rows.append(split_row(lines[j]))
                j += 1
            out.append((i, header, rows))
            i = j
            continue
        i += 1
    return out


def notation_tables(path: Path, word: str = "notation") -> list[Table]:
    """The tables of a notebook under a heading containing `word` (case-insensitive): ATX headings stay in force
    across cells until a heading of the same or a higher level; a bold-only paragraph (`**Notation.**`) until the
    next heading or the end of its cell."""
    stack: list[tuple[int, str]] = []   # (level, text) of the ATX headings in force
    found = []
    for idx, md in markdown_cells(path):
        bold = None
        lines = md.split("\n")
        tables = {k: (h, r) for k, h, r in parse_tables(md)}
        fence = None
        for k, line in enumerate(lines):
            m = _FENCE.match(line)
            if m:
                tok = m.group(1)
                fence = None if fence and line.strip().startswith(fence) else (fence or tok[0] * len(tok))
                continue
            if fence:
                continue
            h = _ATX.match(line)
            if h:
                level = len(h.group(1))
                while stack and stack[-1][0] >= level:
                    stack.pop()
                stack.append((level, h.group(2)))
                bold = None
                continue
            b = _BOLD_LINE.match(line.strip())
            if b:
                bold = b.group(1)
                continue
            if k in tables:
                heads = [t for _, t in stack] + ([bold] if bold else [])
                under = [t for t in heads if word.lower() in t.lower()]
                if under:
                    header, rows = tables[k]
                    found.append(Table(Path(path).name, idx, under[-1], header, rows))
    return found


def symbol_key(sym: str) -> str:
    r"""Comparison key of one symbol: no whitespace, no braces around a single token, no trailing argument list
    (`q(x'\mid x)` -> `q`, `\hat Z_T` and `\hat{Z}_T` -> `\hatZ_T`)."""
    s = sym.strip().strip("$").strip()
    # drop a trailing argument list, but not from a symbol that is only parentheses
    m = re.fullmatch(r"(.+?)\((?:[^()]|\([^()]*\))*\)", s)
    if m and m.group(1).strip():
        s = m.group(1)
    s = re.sub(r"\s+", "", s)
    prev = None
    while prev != s:
        prev = s
        s = re.sub(r"\{(\\[A-Za-z]+|[A-Za-z0-9])\}", r"\1", s)
    return s


def split_symbols(cell: str) -> list[str]:
    r"""The symbols of a symbol cell, as written: `$\pi$, $\tilde\pi$, $Z$` and `$\alpha_0,\beta_0$` give two or
    three; `$t = 0, \dots, T$` gives `t` (the left-hand side names the symbol); `\dots` and empty pieces are dropped."""
    maths = _MATH.findall(cell) or [cell]
    out = []
    for m in maths:
        if "=" in m and not re.search(r"\\[A-Za-z]*=|[<>]=", m):
            out.append(m.split("=", 1)[0].strip())
            continue
        for piece in _split_prose(m, ","):
            p = piece.strip()
            if p and p not in (r"\dots", r"\ldots", r"\cdots", "..."):
                out.append(p)
    return out


def _split_prose(s: str, sep: str) -> list[str]:
    "Split on `sep` outside `$...$`, backticks, braces and parentheses."
    out, cur, depth, math, code = [], [], 0, False, False
    for ch in s:
        if ch == "`" and not math:
            code = not code
        elif ch == "$" and not code:
            math = not math
        elif ch in "{(" and not math and not code:
            depth += 1
        elif ch in "})" and not math and not code:
            depth -= 1
        if ch == sep and depth == 0 and not math and not code:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return out


def split_meaning(meaning: str, n: int) -> list[str]:
    """One meaning per symbol of a row: `$\\pi$, $\\tilde\\pi$, $Z$ | target density, its unnormalised version, ...` gives
    each symbol its own part when the meaning has exactly one part per symbol (split at `;`, else at `,`, outside
    maths and parentheses); otherwise every symbol gets the whole meaning."""
    if n > 1:
        for sep in ";,":
            parts = [normalise_meaning(p) for p in _split_prose(meaning, sep)]
            if len(parts) == n and all(parts):
                return parts
    return [meaning] * n


def normalise_meaning(text: str) -> str:
    "Whitespace collapsed, outer spaces and a final full stop dropped."
    return re.sub(r"\s+", " ", text).strip().rstrip(".").strip()


def _column(header: list[str], *words: str, default: int | None = None) -> int | None:
    for w in words:
        for k, h in enumerate(header):
            if w in h.lower():
                return k
    return default


def table_entries(table: Table) -> list[Entry]:
    "The entries of one notation table: one per symbol of each row, plus the items of an `elsewhere` column."
    sc = _column(table.header, "symbol", default=0)
    mc = _column(table.header, "meaning", "here", default=1)
    ec = _column(table.header, "elsewhere")
    out = []
    for row in table.rows:
        if len(row) <= max(sc, mc):
            continue
        meaning = normalise_meaning(row[mc])
        syms = split_symbols(row[sc])
        for sym, m in zip(syms, split_meaning(meaning, len(syms))):
            out.append(Entry(symbol_key(sym), sym, m, table.notebook, table.cell))
        if ec is not None and ec < len(row):
            for item in _split_prose(row[ec], ";"):
                m = re.match(r"\s*\$([^$]+)\$\s*:\s*(.+)$", item)
                if m:
                    out.append(Entry(symbol_key(m.group(1)), m.group(1).strip(), normalise_meaning(m.group(2)),
                                     table.notebook, table.cell, "elsewhere"))
    return out


def chapter_notebooks(nbs: Path = NBS) -> list[Path]:
    "The chapter notebooks, nbs/[0-9]*.ipynb, in order."
    return sorted(Path(nbs).glob("[0-9]*.ipynb"))


def chapter_entries(nbs: Path = NBS) -> dict[str, list[Entry]]:
    "{notebook name: entries of its notation tables} for every chapter notebook (empty list when it has none)."
    return {p.name: [e for t in notation_tables(p) for e in table_entries(t)] for p in chapter_notebooks(nbs)}


def clashes(entries: list[Entry]) -> dict[str, list[Entry]]:
    "{symbol key: its entries} for the symbols given more than one (normalised) meaning among `entries`."
    by: dict[str, list[Entry]] = {}
    for e in entries:
        by.setdefault(e.symbol, []).append(e)
    return {k: v for k, v in by.items() if len({e.meaning for e in v}) > 1}


def all_clashes(nbs: Path = NBS) -> dict[tuple[str, str], list[Entry]]:
    "{(notebook, symbol key): entries} for every symbol with two meanings within one chapter notebook's tables."
    return {(nb, k): v for nb, es in chapter_entries(nbs).items() for k, v in clashes(es).items()}


# ------------------------------------------------------------------------------------------ the book-wide table
@dataclass
class BookRow:
    "One row of the book-wide table: a symbol, its meaning and the chapters that introduce it."
    symbols: list   # keys
    display: str
    meaning: str
    links: list     # [(label, target)] of the "introduced" column


def book_rows(page: Path = BOOK_PAGE) -> list[BookRow]:
    "The rows of the notation tables of the book-wide page (columns: symbol, meaning, where it is introduced)."
    out = []
    for t in notation_tables(page):
        sc = _column(t.header, "symbol", default=0)
        mc = _column(t.header, "meaning", default=1)
        wc = _column(t.header, "introduced", "where", "chapter", default=len(t.header) - 1)
        for row in t.rows:
            if len(row) <= max(sc, mc, wc):
                continue
            out.append(BookRow([symbol_key(s) for s in split_symbols(row[sc])], row[sc],
                               normalise_meaning(row[mc]), _LINK.findall(row[wc])))
    return out


def _words(text: str) -> set[str]:
    "Content words of a meaning: TeX commands, code, link targets and stop words dropped, crude singular."
    t = _LINK.sub(r"\1", text)
    t = re.sub(r"`[^`]*`", " ", t)
    t = re.sub(r"\\[A-Za-z]+", " ", t)
    words = {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z-]{2,}", t)}
    return {re.sub(r"(?<=[a-z]{3})(es|s)$", "", w) for w in words if w not in _STOP}


def overlap(a: str, b: str) -> float:
    """Shared content words over the smaller set (1: one meaning contains the other's words; 0: nothing shared). A
    meaning without words (only maths, `$Z=\\int\\tilde\\pi$`) agrees when its text occurs in the other, and is
    otherwise undecided (0.25, reported as "specific", never as "different")."""
    wa, wb = _words(a), _words(b)
    if wa and wb:
        return len(wa & wb) / min(len(wa), len(wb))
    sa, sb = re.sub(r"\s+", "", a), re.sub(r"\s+", "", b)
    return 1.0 if sa and sb and (sa in sb or sb in sa) else 0.25


@dataclass
class Mismatch:
    "A chapter's meaning of a symbol against the book-wide table."
    entry: Entry
    kind: str       # "missing", "specific" (shares words with the book's meaning) or "different" (shares none)
    book: str       # the closest book-wide meaning ("" when missing)
    score: float


def compare_with_book(entries: dict[str, list[Entry]], rows: list[BookRow], same: float = 0.5) -> list[Mismatch]:
    """(b): each chapter meaning against the book-wide rows of its symbol: the row that links to the chapter when there
    is one, else the closest row. Overlap >= `same` is agreement (not reported), above 0 "specific", 0 "different"."""
    out = []
    for nb, es in entries.items():
        for e in es:
            cand = [r for r in rows if e.symbol in r.symbols]
            if not cand:
                out.append(Mismatch(e, "missing", "", 0.0))
                continue
            own = [r for r in cand if any(t.split("#")[0] == nb for _, t in r.links)]
            pool = own or cand
            best = max(pool, key=lambda r: overlap(e.meaning, r.meaning))
            s = overlap(e.meaning, best.meaning)
            if own and s == 0:   # the row for this chapter disagrees: is any other row right?
                other = max(cand, key=lambda r: overlap(e.meaning, r.meaning))
                if overlap(e.meaning, other.meaning) > 0:
                    best, s = other, overlap(e.meaning, other.meaning)
            if s < same:
                out.append(Mismatch(e, "specific" if s > 0 else "different", best.meaning, s))
    return out


def report(nbs: Path = NBS, page: Path = BOOK_PAGE, out=sys.stdout) -> tuple[int, int]:
    "Print the per-chapter symbols, the clashes (a) and the differences from the book-wide table (b); return counts."
    entries = chapter_entries(nbs)
    print("Symbols defined by each chapter's notation tables", file=out)
    for nb, es in entries.items():
        syms = list(dict.fromkeys(f"${e.display}$" + ("" if e.kind == "main" else " (elsewhere)") for e in es))
        print(f"  {nb}: " + (", ".join(syms) if syms else "(no notation table)"), file=out)
    cl = {(nb, k): v for nb, es in entries.items() for k, v in clashes(es).items()}
    print(f"\n(a) Symbols with two meanings within one chapter's tables: {len(cl)}", file=out)
    for (nb, k), v in cl.items():
        print(f"  {nb} ${v[0].display}$:", file=out)
        for e in v:
            print(f"      cell {e.cell} [{e.kind}] {e.meaning}", file=out)
    different = 0
    if Path(page).exists():
        mm = compare_with_book(entries, book_rows(page))
        different = sum(m.kind == "different" for m in mm)
        print(f"\n(b) Meanings that differ from the book-wide table ({Path(page).name}): "
              f"{different} different, {sum(m.kind == 'specific' for m in mm)} more specific, "
              f"{sum(m.kind == 'missing' for m in mm)} not listed", file=out)
        for m in sorted(mm, key=lambda m: ("different", "specific", "missing").index(m.kind)):
            e = m.entry
            print(f"  [{m.kind}] {e.notebook} cell {e.cell} ${e.display}$: {e.meaning}", file=out)
            if m.book:
                print(f"      book-wide: {m.book}", file=out)
    else:
        print(f"\n(b) no book-wide page {page}", file=out)
    return len(cl), different


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="exit 1 on a clash (a) or a plainly different meaning (b)")
    a = p.parse_args(argv)
    n_clash, n_diff = report()
    return 1 if a.check and (n_clash or n_diff) else 0


if __name__ == "__main__":
    sys.exit(main())
