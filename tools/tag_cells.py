#!/usr/bin/env python
"""Give the chapter notebooks the cell options that make them read as a book on the website; idempotent.

    python tools/tag_cells.py                 # tag nbs/*.ipynb in place, print what changed
    python tools/tag_cells.py --check         # exit 1 if a notebook would change (nothing is written)
    python tools/tag_cells.py --dry-run -v    # show every change, write nothing
    python tools/tag_cells.py path/to/nb.ipynb ...

What it adds (options that nbdev and Quarto both read; the notebooks run and test exactly as before, and the
cells stay in the notebooks, in JupyterLab and under nbval):

- **test cells** (`assert`, `pytest`, `raises`/`warns`) that show nothing get `#| hide` (nbdev drops them from the page);
  test cells that also show something (a figure, a table, printed text) keep their output and get
  `#| code-fold: true` with the summary "Code and checks";
- **figure cells** whose last line calls a `fig_*` function get `#| label: fig-<name>` (Quarto numbers them:
  "Figure 3"), `#| fig-cap:` (the function's one-line docstring) and `#| fig-alt:` (the same text, for screen
  readers); a figure drawn twice in a chapter gets `fig-<name>-2`, ...;
- the **"Regenerate the figures"** section (its heading cell and the `REGENERATE = ...` cell) is tagged
  `remove-cell`: maintainer material, dropped from the website (tools/build_site.py and Quarto honour the tag);
  when that heading shares a markdown cell with other text, the cell is split at the heading first.

- **folding in JupyterLab** (cell metadata `jupyter.source_hidden`, which JupyterLab and Jupyter Notebook 7 read
  and `nbdev_clean` keeps): the code a reader need not read to follow the lesson starts collapsed, its output
  shown; one click on the bar opens it. Folded: `#| hide` cells (checks, setup, the install cell), "Code and checks"
  cells, export cells that only import, export cells that only define `fig_*` functions and private helpers (the
  figure below is the lesson, not its plotting code), and any cell longer than a screen (`SCREEN` non-blank lines). This option is the
  script's own: it is set and cleared by these rules alone. `--report` prints, for every chapter, the code lines a
  reader scrolls past before the first figure, all cells open and with this folding, and the words of prose
  before it (`MOTIVATE_WORDS`: a figure that motivates the chapter comes within 600).

A cell that already has one of these options keeps what it has (the script never edits an option it finds), so
hand-written captions win and a second run changes nothing. Exported cells, `#| hide` cells and widget cells are
left alone. Notebooks are written in nbdev's clean format (execnb's `write_nb`), so `nbdev_clean` is a no-op after it.
"""
from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).absolute().parent.parent
FOLD_SUMMARY = "Code and checks"
SCREEN = 40    # non-blank code lines that fit on a laptop screen in JupyterLab; a longer cell starts folded
_DIRECTIVE = re.compile(r"^\s*#\s*\|\s*(.*)$")
_REGEN_HEAD = re.compile(r"^#{1,6}\s+Regenerat(e|ing) (the )?figures\b", re.I | re.M)


def src(cell) -> str:
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else (s or "")


def directives(code: str) -> tuple[dict, list[str], list[str]]:
    "The leading `#|` lines as {name: value}, those lines, and the rest of the code's lines."
    lines = code.split("\n")
    head, opts = [], {}
    while lines and _DIRECTIVE.match(lines[0]):
        line = lines.pop(0)
        head.append(line)
        body = _DIRECTIVE.match(line).group(1).strip()
        if not body:
            continue
        if ":" in body.split()[0] or re.match(r"^[\w-]+\s*:", body):
            k, _, v = body.partition(":")
            opts[k.strip()] = v.strip()
        else:
            parts = body.split()
            opts[parts[0]] = " ".join(parts[1:])
    return opts, head, lines


def quote(s: str) -> str:
    "A YAML double-quoted scalar (JSON's string syntax is YAML's)."
    return json.dumps(s, ensure_ascii=False)


def add_directives(cell, new: list[str]):
    "Append `#| ...` lines after the cell's existing directives."
    opts, head, rest = directives(src(cell))
    set_source(cell, "\n".join(head + [f"#| {d}" for d in new] + rest))


def set_source(cell, text: str):
    "Store a cell's source as a list of lines, as Jupyter and nbdev write it."
    cell["source"] = text.splitlines(True)


# ------------------------------------------------------------------------------------------ classification
def _parse(code: str):
    # IPython magics and shell escapes are not Python: blank them before parsing
    cleaned = "\n".join("" if re.match(r"^\s*[%!]", l) else l for l in code.split("\n"))
    try:
        return ast.parse(cleaned)
    except SyntaxError:
        return None


def is_test_cell(tree) -> bool:
    "Has an `assert` anywhere, or uses `pytest` or the book's `raises`/`warns` (bayesnotes.utils: an expected error or warning)."
    for n in ast.walk(tree):
        if isinstance(n, ast.Assert):
            return True
        if isinstance(n, ast.Name) and n.id in ("pytest", "raises", "warns"):
            return True
        if isinstance(n, (ast.Import, ast.ImportFrom)) and any(a.name.split(".")[0] == "pytest" for a in n.names) \
                or isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "pytest":
            return True
    return False


def _called(node) -> str:
    f = node.func if isinstance(node, ast.Call) else None
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        return f.attr
    return ""


def shows_something(tree, code: str) -> bool:
    "Whether the cell displays anything: a last expression (not silenced with `;`), print/display, pyplot."
    body = tree.body
    if body and isinstance(body[-1], ast.Expr) and not code.rstrip().endswith(";"):
        return True
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and _called(n) in ("print", "display", "show", "imshow", "plot"):
            return True
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "plt":
            return True
    return False


def figure_call(tree, code: str) -> str | None:
    "The `fig_*` function the cell's last line calls for display, or None."
    if not tree.body or code.rstrip().endswith(";"):
        return None
    last = tree.body[-1]
    if isinstance(last, ast.Expr) and isinstance(last.value, ast.Call):
        name = _called(last.value)
        if name.startswith("fig_"):
            return name
    return None


def figure_docs(paths) -> dict:
    "{fig_name: one-line docstring} for every `def fig_*` in the code cells of the notebooks."
    docs = {}
    for p in paths:
        for cell in json.loads(Path(p).read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] != "code":
                continue
            tree = _parse(src(cell))
            for n in ast.walk(tree) if tree else []:
                if isinstance(n, ast.FunctionDef) and n.name.startswith("fig_"):
                    d = ast.get_docstring(n)
                    if d:
                        docs.setdefault(n.name, " ".join(d.strip().split("\n\n")[0].split()))
    return docs


def label_for(name: str) -> str:
    return "fig-" + re.sub(r"[^a-z0-9]+", "-", name[len("fig_"):].lower()).strip("-")


# ------------------------------------------------------------------------------------------ tagging
def tag_notebook(nb: dict, docs: dict) -> list[str]:
    "Tag one notebook in place; return a description of each change."
    changes, cells = [], nb["cells"]
    # 1. the "Regenerate the figures" section: split its heading off a shared cell, tag heading and code
    i = 0
    while i < len(cells):
        c = cells[i]
        if c["cell_type"] == "markdown":
            s = src(c)
            m = _REGEN_HEAD.search(s)
            if m and m.start() > 0 and s[:m.start()].strip():
                new = {"cell_type": "markdown", "metadata": {}, "source": s[m.start():].splitlines(True)}
                if "id" in c:
                    new["id"] = _new_id(nb, c["id"])
                set_source(c, s[:m.start()].rstrip("\n"))
                cells.insert(i + 1, new)
                changes.append(f"cell {i}: split the 'Regenerate the figures' heading into a cell of its own")
        i += 1
    labels = set()
    for i, c in enumerate(cells):
        s = src(c)
        tags = (c.get("metadata") or {}).get("tags") or []
        if c["cell_type"] == "markdown":
            if _REGEN_HEAD.match(s.lstrip()) and "remove-cell" not in tags:
                c.setdefault("metadata", {})["tags"] = [*tags, "remove-cell"]
                changes.append(f"cell {i}: 'Regenerate the figures' heading tagged remove-cell")
            continue
        if c["cell_type"] != "code":
            continue
        opts, _, rest = directives(s)
        if "label" in opts and opts["label"].startswith("fig-"):
            labels.add(opts["label"])
    for i, c in enumerate(cells):
        if c["cell_type"] != "code":
            continue
        s = src(c)
        tags = (c.get("metadata") or {}).get("tags") or []
        opts, _, rest = directives(s)
        code = "\n".join(rest)
        if re.search(r"^REGENERATE\s*=", code, re.M):
            if "remove-cell" not in tags:
                c.setdefault("metadata", {})["tags"] = [*tags, "remove-cell"]
                changes.append(f"cell {i}: REGENERATE cell tagged remove-cell")
            continue
        if any(k in opts for k in ("export", "exports", "exporti", "hide", "default_exp", "include", "echo")) \
                or "remove-cell" in tags or re.search(r"\binteract(ive)?\(", code):
            continue
        tree = _parse(code)
        if tree is None:
            continue
        new = []
        if is_test_cell(tree):
            if shows_something(tree, code):
                if "code-fold" not in opts:
                    new += ["code-fold: true", f"code-summary: {quote(FOLD_SUMMARY)}"]
            else:
                new.append("hide")
        fig = figure_call(tree, code)
        if fig and "hide" not in new and not any(k in opts for k in ("label", "fig-cap", "fig-alt")):
            base = label = label_for(fig)
            k = 1
            while label in labels:
                k += 1
                label = f"{base}-{k}"
            labels.add(label)
            new.append(f"label: {label}")
            if docs.get(fig):
                new += [f"fig-cap: {quote(docs[fig])}", f"fig-alt: {quote(docs[fig])}"]
        if new:
            add_directives(c, new)
            first = code.strip().split("\n")[0][:60]
            changes.append(f"cell {i}: {', '.join(n.split(':')[0] for n in new)}  <- {first}")
    return changes


def _only(tree, kinds) -> bool:
    "Every top-level statement is one of `kinds` (a `try` counts when its body is)."
    return bool(tree.body) and all(isinstance(n, kinds) or isinstance(n, ast.Try) and all(isinstance(m, kinds) for m in n.body)
                                   for n in tree.body)


def folded(cell) -> bool:
    "Should this code cell start folded in JupyterLab (the rules of the module docstring)?"
    opts, _, rest = directives(src(cell))
    body = [l for l in rest if l.strip()]
    if "hide" in opts or opts.get("code-fold") == "true" or len(body) > SCREEN:
        return True
    if not any(k in opts for k in ("export", "exports", "exporti")):
        return False
    tree = _parse("\n".join(rest))
    if tree is None:
        return False
    if len(body) > 3 and _only(tree, (ast.Import, ast.ImportFrom)):
        return True
    defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    return (bool(defs) and len(defs) == len(tree.body) and any(n.name.startswith("fig_") for n in defs)
            and all(n.name.startswith(("fig_", "_")) for n in defs))


def fold_for_jupyterlab(nb: dict) -> list[str]:
    "Set `metadata.jupyter.source_hidden` of every code cell from `folded`; return a description of each change."
    changes = []
    for i, c in enumerate(nb["cells"]):
        if c["cell_type"] != "code":
            continue
        meta = c.setdefault("metadata", {})
        jl = meta.get("jupyter") or {}
        want = folded(c)
        if bool(jl.get("source_hidden")) == want:
            continue
        if want:
            meta["jupyter"] = {**jl, "source_hidden": True}
        else:
            jl.pop("source_hidden", None)
            if jl:
                meta["jupyter"] = jl
            else:
                meta.pop("jupyter", None)
        changes.append(f"cell {i}: {'folded' if want else 'unfolded'} in JupyterLab")
    return changes


def first_figure(cells) -> int:
    "Index of the first cell that draws a numbered figure or a widget (len(cells) when none does)."
    for i, c in enumerate(cells):
        if c["cell_type"] == "code":
            opts, _, rest = directives(src(c))
            if opts.get("label", "").startswith("fig-") or re.search(r"\binteract(ive)?\(", "\n".join(rest)):
                return i
    return len(cells)


def lines_before_figure(cells, folding: bool = True) -> int:
    "Code lines (non-blank, directives included) a reader scrolls past before the first figure, with or without folding."
    n = 0
    for c in cells[:first_figure(cells)]:
        if c["cell_type"] != "code" or folding and (c.get("metadata") or {}).get("jupyter", {}).get("source_hidden"):
            continue
        n += sum(1 for l in src(c).split("\n") if l.strip())
    return n


MOTIVATE_WORDS = 600   # a chapter's first figure comes within this many words of prose (issue 30, item 3)


def words_before_figure(cells) -> int:
    """Words of prose a reader reads before the first figure: the markdown cells above it, with display and inline
    maths counted as one word each and markup (headings' #, links' targets, HTML comments) dropped."""
    n = 0
    for c in cells[:first_figure(cells)]:
        if c["cell_type"] != "markdown":
            continue
        t = re.sub(r"<!--.*?-->", " ", src(c), flags=re.S)
        t = re.sub(r"\$\$.*?\$\$|\$[^$\n]+\$", " M ", t, flags=re.S)
        t = re.sub(r"\]\([^)]*\)", "]", t)
        n += len(re.findall(r"[A-Za-z0-9][\w'’-]*", t))
    return n


def _new_id(nb, base: str) -> str:
    ids = {c.get("id") for c in nb["cells"]}
    k = 1
    while f"{base}-{k}" in ids:
        k += 1
    return f"{base}-{k}"[:64]


def write(nb: dict, path: Path):
    "Write as nbdev_clean does (execnb's nb2str: sorted keys, one-space indent, UTF-8, final newline)."
    import importlib.util

    if importlib.util.find_spec("execnb") is not None:
        here = str(Path(__file__).absolute().parent)
        if here not in sys.path:
            sys.path.insert(0, here)
        import compat  # execnb's nb2str, through tools/compat.py

        text = compat.nb2str(nb)
    else:  # the same format, for an environment without the documentation stack
        text = json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n"
    path.write_text(text, encoding="utf-8")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("notebooks", nargs="*", type=Path, help="notebooks to tag (default: nbs/[0-9]*.ipynb)")
    p.add_argument("--check", action="store_true", help="exit 1 if any notebook would change; write nothing")
    p.add_argument("--dry-run", action="store_true", help="report the changes; write nothing")
    p.add_argument("-v", "--verbose", action="store_true", help="list every change")
    p.add_argument("--report", action="store_true", help="per chapter: code lines before the first figure, all open and folded")
    a = p.parse_args(argv)
    report = []
    paths = a.notebooks or sorted((ROOT / "nbs").glob("[0-9]*.ipynb"))
    docs = figure_docs(sorted(set(paths) | set((ROOT / "nbs").glob("*.ipynb"))))
    total = 0
    for path in paths:
        before = path.read_text(encoding="utf-8")
        nb = json.loads(before)
        changes = tag_notebook(nb, docs)
        changes += fold_for_jupyterlab(nb)
        if a.report:
            report.append((path.stem, lines_before_figure(nb["cells"], False), lines_before_figure(nb["cells"]),
                           words_before_figure(nb["cells"])))
        if not changes:
            continue
        total += len(changes)
        print(f"{path}: {len(changes)} change(s)")
        if a.verbose or a.dry_run:
            for ch in changes:
                print(f"  {ch}")
        if not (a.check or a.dry_run):
            write(nb, path)
    if report:
        print(f"{'chapter':28s} {'all open':>8s} {'folded':>7s}  {'ratio':>5s} {'words':>6s}  code lines a reader scrolls past "
              "before the first figure (all open, folded), and the words of prose before it")
        for name, before, after, words in report:
            print(f"{name:28s} {before:8d} {after:7d}  {after / max(before, 1):5.2f} {words:6d}")
        print(f"{'total':28s} {sum(r[1] for r in report):8d} {sum(r[2] for r in report):7d}")
    if a.check and total:
        print(f"--check: {total} change(s) to make; run python tools/tag_cells.py")
        return 1
    print(f"{total} change(s)" + (" (not written)" if (a.check or a.dry_run) and total else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
