#!/usr/bin/env python
"""Build the bayesnotes website: export the package, execute the notebooks, render the site.

    python tools/build_site.py                 # build into _docs/ (settings.ini doc_path) and print where to open it
    python tools/build_site.py --serve         # build, then serve on http://127.0.0.1:8000/ (search needs http)
    python tools/build_site.py --exec-glob '00_core.ipynb|index.ipynb' --out /tmp/site --build-dir /tmp/build

Steps
1. `nbdev_export` the package (skip with --no-export).
2. Execute every notebook of nbs/ into a staging copy (`_build/exec/`; nbs/ is never written) with nbclient,
   skipping `#| eval: false` cells, with matplotlib's inline backend as Quarto's Jupyter engine sets it. Figures
   are rendered at 2x and palette-compressed (tools/figures.py); the function of every `interact` widget is then
   rendered on a grid of its control values into frames for a scrubber (tools/scrubbers.py, --scrubber-budget
   seconds per widget). Each execution is cached, keyed on the notebook, the package's source and those two
   tools, so unchanged notebooks are not executed again (--force to redo). Per-notebook times are printed.
3. With a real `quarto` on PATH (and no --fallback): `nbdev_docs` on a staging copy of the project whose nbs/
   holds the executed notebooks; its `_docs` is copied to --out.
4. Otherwise, the offline path: nbdev's own doc processors (`FilterDefaults`, what `nbdev_docs` runs) apply the
   directives, render `show_doc` and remove hidden cells, without nbdev trying to install Quarto; citations
   are resolved with pybtex (tools/citations.py) with a reference list per page; figures and equations with
   Quarto labels are numbered and `@fig-`/`@eq-` references resolved (tools/book_pages.py); pages take nbdev's
   names (00_core.ipynb -> core.html) and links to notebooks and nbdev's doc links are rewritten to match;
   smalldocs renders the site from the top-level _quarto.yml with its maths as MathML from pandoc
   (tools/mathml.py; Quarto's `html-math-method: mathml`); its HTML is post-processed (figures moved into
   lazily loaded files, tables of contents numbered, search ranked prose first, web fonts dropped, nbdev links
   to undocumented anchors repaired, leftovers and anything loaded from another host reported).

Both engines get the same changes to what nbdev does (see `prepare_for_docs`, `doc_filters`, tools/book_pages.py):
- prose written under the `# Title` / `> description` of the first cell is kept (nbdev drops it);
- `#| export` cells show their code, folded (closed) under "Exported source" like nbdev's `#| exports`
  (--hide-export-source for nbdev's default of showing only the show_doc);
- widgets become scrubbers (or a note when the notebook was not executed): no widget state or JavaScript;
- each chapter gets Open in Colab / Launch Binder / Download .ipynb links (the notebook is shipped in notebooks/);
- cells tagged `remove-cell` are dropped, stderr warnings are dropped (`execute: warning: false`), hand-written
  section numbers give way to Quarto's (`number-sections`), show_doc headings leave the table of contents for one
  "API reference" section, and the landing and contributing pages are unnumbered;
- nbdev's doc shell runs only the imports of cells it runs for their imports (not the computation in them),
  the outputs the notebook was executed with are kept, show_doc copes with numpy-array defaults, and a
  show_doc source link points at the notebook's own module when two modules export the same name.
The cell options that the notebooks themselves carry for the site (hidden test cells, figure labels and captions)
are written by tools/tag_cells.py.

Every name of nbdev, execnb, fastcore and smalldocs that this build uses, and every pattern it reads or patches their
output with, is reached through tools/compat.py (one test each in tests/test_compat.py): an upgrade that changes one
of them fails there, naming the library and its version, or stops the build with `compat.MarkupChanged`.
"""
from __future__ import annotations

import argparse
import copy
import fnmatch
import hashlib
import html as htmllib
import json
import os
import posixpath
import re
import shutil
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

HERE = Path(__file__).absolute().parent
sys.path.insert(0, str(HERE))

import compat  # noqa: E402  (every nbdev/execnb/fastcore/smalldocs internal goes through tools/compat.py)

EXEC_VERSION = "4"  # bump to invalidate every cached execution (3: scrubber frames, 4: 2x figures)
# the tools that run inside the executing kernel: a change to them also invalidates the cached executions
KERNEL_TOOLS = ("scrubbers.py", "figures.py")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
SCRUBBERS_DIR = "scrubbers"  # in the site: scrubbers/<page>/w<k>/<frame>.png
NOTEBOOKS_DIR = "notebooks"  # in the site: a copy of each chapter notebook, for "Download .ipynb"
REPR_RE = re.compile(r"^(interactive|VBox|HBox|Output|IntSlider|FloatSlider|Dropdown|Button|Checkbox)\(children=|^\w+\(value=.*, description=")


def say(*a):
    print(*a, flush=True)


@dataclass
class Result:
    "What a build made."
    out: Path
    pages: dict = field(default_factory=dict)  # notebook (relative to nbs/) -> page (relative to out)
    warnings: list = field(default_factory=list)
    exec_times: dict = field(default_factory=dict)  # notebook -> seconds, for executed ones
    engine: str = "smalldocs"

    def warn(self, msg):
        if msg not in self.warnings:
            self.warnings.append(msg)
            say(f"WARNING: {msg}")


# ------------------------------------------------------------------------------------------ project
class Project:
    "The nbdev project: paths from settings.ini."

    def __init__(self, root: Path):
        self.root = root.resolve()
        # nbdev 2.4's get_config(path=...) still finds the settings.ini above the working directory first
        with project_cwd(self.root):
            self.cfg = compat.get_config()
            self.nbs = Path(self.cfg.nbs_path).resolve()
            self.lib = Path(self.cfg.lib_path).resolve()
        self.doc_path = Path(self.cfg.doc_path)

    def notebooks(self) -> list[PurePosixPath]:
        "Every notebook nbdev would document, relative to nbs/, sorted (files and folders starting `_` or `.` skipped)."
        return sorted(PurePosixPath(Path(p).relative_to(self.nbs).as_posix()) for p in compat.nbglob(self.nbs))

    def package_hash(self) -> str:
        h = hashlib.sha256()
        for f in sorted(self.lib.rglob("*")):
            if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc":
                h.update(f.relative_to(self.lib).as_posix().encode())
                h.update(f.read_bytes())
        return h.hexdigest()

    def doc_url_prefix(self) -> str:
        "The absolute prefix nbdev puts on its doc links, e.g. https://bayesnotes.github.io/bayesnotes/."
        from urllib.parse import urljoin

        return urljoin(self.cfg.get("doc_host", "") + "/", self.cfg.get("doc_baseurl", "")).rstrip("/") + "/"

    def quarto_yml(self) -> dict:
        "The top-level _quarto.yml (nbs/_quarto.yml is a symlink to it), merged with its metadata-files."
        import yaml

        path = self.nbs / "_quarto.yml"
        if not path.exists():
            path = self.root / "_quarto.yml"
        cfg = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        for extra in cfg.get("metadata-files") or []:
            p = self.nbs / extra
            if p.exists():
                cfg = _merge(yaml.safe_load(p.read_text(encoding="utf-8")) or {}, cfg)
        return cfg


def _merge(a: dict, b: dict) -> dict:
    "Merge as Quarto does: b wins, nested dicts merged."
    out = copy.deepcopy(a)
    for k, v in (b or {}).items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


def page_name(nb: PurePosixPath) -> PurePosixPath:
    "nbdev's page for a notebook: the numeric prefix dropped, lower case, .html (00_core.ipynb -> core.html)."
    return PurePosixPath(compat.page_name(Path(nb)).as_posix())


def sidebar_order(cfg: dict) -> list[str]:
    "The notebooks of website.sidebar.contents, in order (strings and {href/file: ...} entries, sections flattened)."
    out = []

    def walk(items):
        for it in items or []:
            if isinstance(it, str):
                out.append(it)
            elif isinstance(it, dict):
                h = it.get("href") or it.get("file")
                if h:
                    out.append(h)
                walk(it.get("contents"))

    sb = (cfg.get("website") or {}).get("sidebar")
    for bar in sb if isinstance(sb, list) else [sb]:
        if isinstance(bar, dict):
            walk(bar.get("contents"))
    return out


class project_cwd:
    """Work inside a project folder. nbdev reads settings.ini from the working directory through
    `get_config()`, which is cached: the cache is cleared on the way in and out so nbdev never acts on
    another folder's config (e.g. writing the real repo's nbs/nbdev.yml while building a staging copy)."""

    def __init__(self, path):
        self.path = Path(path)

    def _clear(self):
        compat.clear_nbdev_caches()

    def __enter__(self):
        self.old = os.getcwd()
        os.chdir(self.path)
        self._clear()

    def __exit__(self, *exc):
        os.chdir(self.old)
        self._clear()


# ------------------------------------------------------------------------------------------ export
def export_package(proj: Project):
    t = time.time()
    os.environ.pop("IN_TEST", None)  # nbdev skips _modidx.py when IN_TEST is set
    compat.export_package()
    say(f"exported {proj.cfg.lib_name} with nbdev_export ({time.time() - t:.1f} s)")


# ------------------------------------------------------------------------------------------ execution
def _directives(src: str) -> dict:
    "The leading `#|` directives of a code cell, as nbdev reads them (`eval: false` -> {'eval:': ['false']})."
    out = {}
    for line in src.splitlines():
        if not line.strip():
            continue
        if not re.match(r"\s*#\s*\|", line):
            break
        d = compat.directive(line)
        if d:
            out[d[0]] = d[1]
    return out


def _skip_eval(cell) -> bool:
    return cell.get("cell_type") == "code" and [a.lower() for a in _directives(cell.get("source", "")).get("eval:", [])] == ["false"]


def execute_notebook(src: Path, dest: Path, cwd: Path, timeout: int, budget: float = 30.0):
    """Execute `src` into `dest` with nbclient (`#| eval: false` cells skipped), then render the frames of its
    `interact` widgets (tools/scrubbers.py) into `dest`'s `.frames` folder; each widget cell gets the manifest of
    its frames in its metadata (`bn_scrubbers`). The widget state is dropped: the pages show scrubbers instead."""
    import tempfile

    import nbformat
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    class Client(NotebookClient):
        async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
            if _skip_eval(cell):
                return cell
            return await super().async_execute_cell(cell, cell_index, execution_count, store_history)

    from scrubbers import MARK

    nb = nbformat.read(src, as_version=4)
    frames = dest.with_name(dest.stem + ".frames")
    if frames.exists():
        shutil.rmtree(frames)
    # build-only cells: record the widgets from the start, render their frames at the end (both removed again)
    tools = json.dumps(str(HERE))
    nb.cells.insert(0, nbformat.v4.new_code_cell(f"import sys as _bn_sys; _bn_sys.path.insert(0, {tools}); "
                                                 "import scrubbers as _bn_scrubbers; _bn_scrubbers.record(); "
                                                 "import figures as _bn_figures; _bn_figures.hidpi()"))
    nb.cells.append(nbformat.v4.new_code_cell(f"_bn_scrubbers.render_frames({json.dumps(str(frames))}, {float(budget)!r})"))
    # IPC sockets in a private folder: no TCP port races with other kernels on a busy machine
    with tempfile.TemporaryDirectory(prefix="bn-kernel-") as sockets:
        km = KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(sockets, "kernel"))
        # as Quarto's Jupyter engine does, start the kernel with matplotlib's inline backend, so a returned
        # Figure is stored as an image even when the notebook never imports pyplot
        try:
            Client(nb, km=km, timeout=timeout, startup_timeout=120, resources={"metadata": {"path": str(cwd)}},
                   extra_arguments=["--InteractiveShellApp.matplotlib=inline"],
                   store_widget_state=True, allow_errors=False).execute()  # (False breaks nbclient's Output widget hook)
        finally:  # nbclient leaves a kernel manager it was given running
            if km.has_kernel:
                km.shutdown_kernel(now=False)
    nb.cells.pop(0)
    tail = nb.cells.pop()
    out = "".join(o.get("text", "") for o in tail.get("outputs", []) if o.get("output_type") == "stream")
    manifest = json.loads(out.split(MARK, 1)[1]) if MARK in out else []
    # each `interact` displays its widget once, in the order the widgets were made: match them in that order
    views = [c for c in nb.cells if c.cell_type == "code"
             for o in c.get("outputs", []) if WIDGET_VIEW in (o.get("data") or {})]
    for cell, entry in zip(views, manifest):
        cell.metadata.setdefault("bn_scrubbers", []).append(entry)
    nb.metadata.pop("widgets", None)
    from figures import shrink_outputs

    shrink_outputs(nb)  # 2x PNGs with their display size, palette-compressed
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(".tmp")
    nbformat.write(nb, tmp)
    os.replace(tmp, dest)
    return manifest


def _matches(nb: PurePosixPath, patterns: list[str] | None) -> bool:
    if patterns is None:
        return True
    return any(fnmatch.fnmatch(nb.name, p) or fnmatch.fnmatch(str(nb), p) for p in patterns)


def stage_notebooks(proj: Project, nbs: list[PurePosixPath], build: Path, res: Result, *, execute: bool,
                    patterns: list[str] | None, timeout: int, force: bool, budget: float = 30.0) -> dict:
    """Put every notebook, executed or as it is, into build/exec; return {nb: staged path}.

    The execution cache is this function's few lines (a key file beside each executed notebook), not jupyter-cache
    (checked for issue 15: jupyter-cache 1.0.1; nbdev and execnb have no execution cache; Quarto's `freeze` is
    Quarto's). jupyter-cache keys a notebook on its code cells and kernelspec only, while an execution here also
    depends on the package's source (which other chapters' notebooks export), on the tools that run in the kernel
    (KERNEL_TOOLS), on the Python version and EXEC_VERSION; and it would store, not run, this build's execution
    (skipped `#| eval: false` cells, scrubber frames, 2x figures), adding SQLAlchemy and a database for a key file."""
    staged, cache = {}, build / "exec"
    pkg = proj.package_hash()
    # the kernel imports the package from the repo even when it is not pip-installed
    os.environ["PYTHONPATH"] = os.pathsep.join([str(proj.root), *filter(None, [os.environ.get("PYTHONPATH")])])
    for nb in nbs:
        src, dest = proj.nbs / nb, cache / nb
        if not execute:
            staged[nb] = src
            say(f"  {nb}: not executed (--no-exec)")
            continue
        key = hashlib.sha256(b"|".join([EXEC_VERSION.encode(), src.read_bytes(), pkg.encode(), str(sys.version_info[:2]).encode(),
                                        *[(HERE / t).read_bytes() for t in KERNEL_TOOLS]])).hexdigest()
        keyfile = dest.with_name(dest.name + ".sha256")
        fresh = dest.exists() and keyfile.exists() and keyfile.read_text().strip() == key \
            and ('"bn_scrubbers"' not in dest.read_text(encoding="utf-8") or dest.with_name(dest.stem + ".frames").is_dir())
        if fresh and not force:
            staged[nb] = dest
            say(f"  {nb}: unchanged, using the cached execution")
            continue
        if not _matches(nb, patterns):
            staged[nb] = src
            say(f"  {nb}: not executed (does not match --exec-glob)")
            continue
        t = time.time()
        try:
            manifest = execute_notebook(src, dest, (proj.nbs / nb).parent, timeout, budget)
        except Exception as e:  # nbclient's CellExecutionError carries the traceback
            raise SystemExit(f"executing {nb} failed (the notebooks executed before it are cached):\n"
                             + re.sub(r"\x1b\[[0-9;]*m", "", str(e)))
        keyfile.write_text(key)
        res.exec_times[str(nb)] = time.time() - t
        staged[nb] = dest
        say(f"  {nb}: executed in {res.exec_times[str(nb)]:.1f} s")
        for k, m in enumerate(manifest):
            if m.get("error") or not m.get("frames"):
                res.warn(f"{nb}: widget {k} has no frames ({m.get('error', 'nothing rendered')}); its page shows a note instead")
                continue
            say(f"    widget {k}: {len(m['frames'])} frame(s) ({m['mode']}, {m['seconds_per_frame']:.2f} s each) for "
                + ", ".join(f"{c['label']} ({len(c['values'])})" for c in m["controls"]))
            for f in m.get("failed") or []:
                say(f"      left out: {f}")
    return staged


# ------------------------------------------------------------------------------------------ nbdev processing
def ensure_nbdev_lookup(proj: Project):
    """Make nbdev's symbol lookup (doc links, show_doc's source links) know this package even when it is
    not installed with its `nbdev` entry point, by adding the entry point setup.py would declare."""
    compat.register_nbdev_lookup(proj.cfg.lib_name)


def _src(cell) -> str:
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else (s or "")


def show_export_source(nb):
    "Show the code of `#| export` cells (as nbdev's `#| exports` does: folded open, after its show_doc)."
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        lines = _src(cell).splitlines(True)
        for i, line in enumerate(lines):
            if not re.match(r"\s*#\s*\|", line):
                break
            lines[i] = re.sub(r"^(\s*#\s*\|\s*)export(\s|$)", r"\1exports\2", line)
        cell.source = "".join(lines)


def split_title_cell(nb):
    """Keep only the title (`# ...`) and the `> description` in the first markdown cell.

    nbdev's FrontmatterProc turns that cell into the page's front matter and drops the rest of it (and reads
    `- key: value` bullets there as metadata), so any prose written under the title would vanish from the page.
    The rest of the cell moves to a markdown cell of its own."""
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "raw" and re.search(r"^title:", _src(cell), re.M):
            return  # front matter with a title: nbdev will not read a markdown cell
        if cell.cell_type != "markdown":
            continue
        lines = _src(cell).split("\n")
        j = 0
        while j < len(lines) and not lines[j].strip():
            j += 1
        if j == len(lines) or not re.match(r"#\s+\S", lines[j]):
            return
        j += 1
        k = j
        while k < len(lines) and not lines[k].strip():
            k += 1
        if k < len(lines) and lines[k].startswith(">"):
            while k < len(lines) and lines[k].startswith(">"):
                k += 1
            j = k
        head, rest = "\n".join(lines[:j]).rstrip(), "\n".join(lines[j:]).strip("\n")
        if rest.strip():
            cell.source = head
            nb.cells.insert(i + 1, compat.mk_cell(rest, "markdown"))
        return


# Pages that are read, not run: no Colab or Binder link (how_to_use draws its figure with tools/, which a notebook opened
# alone on Colab does not have; contributing and notation have no code). Every other notebook runs with the package alone:
# make test-reader (tools/run_reader.py) runs each one as Colab would.
PROSE_PAGES = {"how_to_use.ipynb", "notation.ipynb", "contributing.ipynb"}


def notebook_links(proj: "Project", nb: PurePosixPath) -> dict:
    """Where a reader can run or get the chapter's notebook: Colab and Binder (links only, nothing is fetched; not for
    the `PROSE_PAGES`) and the copy of the notebook shipped with the site (`notebooks/<notebook>`, relative to the page)."""
    from urllib.parse import quote

    git = str(proj.cfg.get("git_url", "")).rstrip("/")
    m = re.match(r"https?://github\.com/([^/]+)/([^/]+?)(?:\.git)?$", git)
    branch = proj.cfg.get("branch", "main")
    path = posixpath.join(proj.nbs.relative_to(proj.root).as_posix(), str(nb))
    page = page_name(nb)
    links = {"download": posixpath.relpath(posixpath.join(NOTEBOOKS_DIR, str(nb)), posixpath.dirname(str(page)) or ".")}
    if m and str(nb) not in PROSE_PAGES:
        user, repo = m.groups()
        links["colab"] = f"https://colab.research.google.com/github/{user}/{repo}/blob/{branch}/{quote(path)}"
        links["binder"] = f"https://mybinder.org/v2/gh/{user}/{repo}/{branch}?labpath={quote(path, safe='')}"
    return links


def launch_cell(links: dict, name: str):
    "A markdown cell with the chapter's Open in Colab / Launch Binder / Download .ipynb links."
    items = []
    if links.get("colab"):
        items.append(f'<a class="bn-launch-link" href="{htmllib.escape(links["colab"])}" rel="noopener"><i class="bi bi-google"></i> Open in Colab</a>')
    if links.get("binder"):
        items.append(f'<a class="bn-launch-link" href="{htmllib.escape(links["binder"])}" rel="noopener"><i class="bi bi-rocket-takeoff"></i> Launch Binder</a>')
    items.append(f'<a class="bn-launch-link" href="{htmllib.escape(links["download"])}" download="{htmllib.escape(name)}">'
                 f'<i class="bi bi-download"></i> Download .ipynb</a>')
    return compat.mk_cell('```{=html}\n<div class="bn-launch">\n' + "\n".join(items) + "\n</div>\n```", "markdown")


def widgets_to_scrubbers(nb, nb_rel: PurePosixPath, links: dict | None = None) -> int:
    """Replace each widget output (a view of widget state, which a static page cannot run) with its scrubber
    (tools/scrubbers.py) when the build rendered its frames, else with a note; return how many were replaced."""
    from scrubbers import scrubber_html, static_note

    page = page_name(nb_rel)
    base = posixpath.relpath(posixpath.join(SCRUBBERS_DIR, page.stem), posixpath.dirname(str(page)) or ".")
    run = (links or {}).get("colab") or (links or {}).get("download")
    n = 0
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        entries = list((cell.get("metadata") or {}).pop("bn_scrubbers", None) or [])
        outs = []
        for o in cell.get("outputs") or []:
            data = o.get("data") or {}
            if WIDGET_VIEW not in data:
                outs.append(o)
                continue
            entry = entries.pop(0) if entries else None
            if entry and entry.get("frames"):
                alt = "Figure of the interactive cell above"
                body = scrubber_html(entry, f"{base}/{entry['dir']}/", alt, run)
            else:
                body = static_note(run)
            outs.append({"output_type": "display_data", "metadata": {}, "data": {"text/html": body}})
            n += 1
        cell["outputs"] = outs
    (nb.get("metadata") or {}).pop("widgets", None)
    return n


def prepare_for_docs(nb, show_exports: bool, nb_rel: PurePosixPath | None = None, links: dict | None = None):
    """The changes both site engines get: prose under the title kept, (by default) exported code shown, widgets
    replaced by scrubbers, and a chapter's launch and download links under its title."""
    split_title_cell(nb)
    if show_exports:
        show_export_source(nb)
    if nb_rel is not None:
        widgets_to_scrubbers(nb, nb_rel, links)
    if links:
        at = next((i + 1 for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and re.match(r"\s*#\s", _src(c))), 0)
        nb.cells.insert(at, launch_cell(links, PurePosixPath(links["download"]).name))


class Linker:
    "Rewrite links so nbdev's page names and cross-references agree with the pages smalldocs writes."

    LINK = re.compile(r"(\]\(\s*<?|href=[\"'])([^)\"'\s>]+)")

    def __init__(self, proj: Project, pages: dict):
        self.prefix = proj.doc_url_prefix()
        self.cfg = proj.quarto_yml()
        self.pages = {str(k): str(v) for k, v in pages.items()}  # nb -> page
        self.by_page = set(self.pages.values())

    def target(self, href: str, here: PurePosixPath) -> str | None:
        "The relative link to a page for `href` (a notebook, a nbdev doc URL or a page), or None to leave it."
        base, hash_, frag = href.partition("#")
        if href.startswith(self.prefix):
            path = href[len(self.prefix):].partition("#")[0]
        elif re.match(r"^[a-zA-Z][\w+.-]*:|^//|^#", href) or not base:
            return None
        else:
            path = posixpath.normpath(posixpath.join(str(here.parent), base))
        if path in self.pages:
            path = self.pages[path]
        elif path.endswith(".html") and path in self.by_page:
            pass
        else:
            return None
        rel = posixpath.relpath(path, str(here.parent) or ".")
        return rel + (hash_ + frag if hash_ else "")

    def fix(self, text: str, here: PurePosixPath) -> str:
        def sub(m):
            t = self.target(m.group(2), here)
            return m.group(0) if t is None else m.group(1) + t

        return self.LINK.sub(sub, text)


# Run in nbdev's doc shell before each show_doc: fastcore's docments tests `default != empty`, which raises for a
# numpy-array default; such defaults get a stand-in (same repr, shown type `ndarray`) in the documented signature.
SAFE_SIGNATURE = """
def _bn_safe_signature(f):
    import inspect
    try:
        sig = inspect.signature(f)
    except (TypeError, ValueError):
        return
    def ok(v):
        try:
            return isinstance(v != inspect.Parameter.empty, bool)
        except Exception:
            return False
    if all(ok(p.default) for p in sig.parameters.values()):
        return
    def stand_in(v):
        return type(type(v).__name__, (), {"__repr__": lambda self, r=repr(v): r})()
    params = [p if ok(p.default) else p.replace(default=stand_in(p.default)) for p in sig.parameters.values()]
    try:
        f.__signature__ = sig.replace(parameters=params)
    except (AttributeError, TypeError):
        pass
"""


def page_settings(cfg: dict) -> dict:
    "What tools/book_pages.py reads from the site config (_quarto.yml): section numbering and warnings."
    html = ((cfg.get("format") or {}).get("html") or {}) if isinstance((cfg.get("format") or {}).get("html"), dict) else {}
    execute = cfg.get("execute") or {}
    return {"number_sections": bool(html.get("number-sections", cfg.get("number-sections", False))),
            "warnings": execute.get("warning", True) is not False}


def doc_filters(nb_name, warn, settings: dict | None = None):
    """nbdev's `FilterDefaults` (the processors `nbdev_docs` runs), with one change to `exec_show_docs`.

    nbdev's doc shell runs every cell that imports something, including any computation in the same cell (a
    sampler run, a figure), only to define the names `show_doc` documents; its outputs then replace the stored
    ones. Here a cell that nbdev would run for its imports runs only its import statements; exported cells
    and `show_doc` cells run as in nbdev. The outputs and widget state the notebook was executed with are kept."""
    import ast

    FilterDefaults, exec_show_docs = compat.doc_processor_classes()

    class exec_show_docs_imports(compat.show_docs_processor_base()):
        def begin(self):
            super().begin()
            if self.has_shell:
                self.shell_run(SAFE_SIGNATURE)
            exp, cfg = compat.default_exp(self.nb), compat.get_config()
            self.py = f"{Path(cfg.lib_path).name}/{exp.replace('.', '/')}.py" if exp else None
            self.src_url = f"{cfg.git_url}/blob/{cfg.branch}/"

        def fix_source_link(self, cell, name):
            """nbdev finds the source link of a name defined in the notebook by its bare name among all modules, so
            when two modules export the same name it links the other module's file. The notebook's own module
            (`default_exp`) wins when it defines the name."""
            line = compat.exported_lineno(name, self.py) if self.py else None
            if not line:
                return
            url = f"{self.src_url}{self.py}#L{line}"
            for out in cell.get("outputs", []):
                md = (out.get("data") or {}).get("text/markdown")
                if md is None:
                    continue
                text = "".join(md) if isinstance(md, list) else md
                out["data"]["text/markdown"] = compat.set_showdoc_source_link(text, url, f"{nb_name}: show_doc({name})")

        def __call__(self, cell):
            if not self.notebook_has_docs or not self.has_shell:
                return
            fm = self.frontmatter
            if compat.str2bool(fm.get("skip_showdoc", False)) or not compat.do_eval(cell):
                return
            full = set(self.cell_directives(cell)) & {"export", "exports", "exporti", "exec_doc"} or self.cell_has_show_doc(cell) \
                or re.search(r"^show_doc", cell.source, re.M)
            if full:
                names = re.findall(r"^show_doc\(([\w.]+)", cell.source, re.M)
                for name in names:
                    self.shell_run(f"_bn_safe_signature({name})")
                self.shell_cell(cell)
                if len(names) == 1 and not self.shell_error:
                    self.fix_source_link(cell, names[0])
            else:
                imports = [n for n in ast.parse(cell.source).body if isinstance(n, (ast.Import, ast.ImportFrom))]
                self.shell_run("\n".join(ast.unparse(n) for n in imports))
            if self.shell_error:
                e = self.shell_error
                if self.cell_has_show_doc(cell) or re.search(r"^show_doc", cell.source, re.M):
                    # one symbol whose signature nbdev cannot render should not stop the whole site
                    cell.outputs = []
                    self.clear_shell_error()
                    name = re.search(r"show_doc\((.*?)\)", cell.source)
                    warn(f"{nb_name}: show_doc({name.group(1) if name else '?'}) failed, so it has no API doc: "
                         f"{type(e).__name__}: {e}" + (" (fastcore's docments cannot compare an array default: use a tuple or None)"
                                                       if "truth value of an array" in str(e) else ""))
                    return
                raise Exception(f"Error in notebook {nb_name} in cell {self.cell_index(cell)}:\n{cell.source}") from e

    class Filters(compat.doc_filters_class({exec_show_docs: exec_show_docs_imports})):
        def __call__(self, nb):
            from book_pages import book_pages, drop_removed_cells

            drop_removed_cells(nb)  # before nbdev's doc shell, so that nothing in them runs
            if nb.cells and nb.cells[-1].cell_type == "code" and re.search(r"^#\|\s*export", nb.cells[-1].source, re.M):
                # nbdev 2's mv_exports looks at the cell after every export cell: a notebook that ends with one (the
                # checkers at the end of a solutions notebook) would stop the build with an IndexError
                nb.cells.append(compat.mk_cell("<!-- end of the notebook -->", "markdown"))
            # the outputs the notebook was executed with (or none, when it was not executed) are the ones to
            # show; cells are kept alive in `stored` so their ids cannot be reused by new show_doc cells
            stored = {id(c): (c, copy.deepcopy(c.get("outputs"))) for c in nb.cells if c.cell_type == "code"}
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", "Found cells containing imports and other code")
                super().__call__(nb)
            for c in nb.cells:
                if id(c) in stored and stored[id(c)][0] is c and stored[id(c)][1] is not None:
                    c.outputs = stored[id(c)][1]
            # exec_show_docs merges the widgets of its own in-process shell into the metadata: no page embeds widget
            # state (widgets are scrubbers, tools/scrubbers.py)
            nb.metadata.pop("widgets", None)
            book_pages(nb, **(settings or {}))
            cfg = compat.get_config()
            if Path(compat.nb_path(nb)).name in {cfg.get("readme_nb", "index.ipynb"), *cfg.get("readme_extra_nbs", "").split()}:
                from book_pages import set_front_matter

                set_front_matter(nb, **{"number-sections": False})  # the landing and contributing pages are no chapters
            try:
                from ipywidgets import Widget

                Widget.close_all()
            except ImportError:
                pass

    return Filters()


def process_notebook(nb_path: Path, nb_rel: PurePosixPath, page: PurePosixPath, linker: Linker, bib, res: Result,
                     show_exports: bool, conv=None, links: dict | None = None):
    """Run nbdev's doc processors on one staged notebook; resolve citations and links; return the notebook.
    With `conv` (tools/mathml.py), maths in the title and description become Unicode text (they are also the
    page's <title>, its sidebar entry and its previous/next link)."""
    import yaml

    nb = compat.read_nb(nb_path)
    compat.set_nb_path(nb, nb_path.with_name(nb_rel.name))  # FrontmatterProc names the page from it
    prepare_for_docs(nb, show_exports, nb_rel, links)
    doc_filters(nb_rel, res.warn, page_settings(linker.cfg))(nb)
    from book_pages import crossrefs
    from mathml import tex_to_text

    crossrefs(nb, (lambda s: tex_to_text(s, conv)) if conv is not None else None)

    cited, unknown = [], []
    for cell in nb.cells:
        src = _src(cell)
        if cell.cell_type == "raw" and src.lstrip().startswith("---"):  # nbdev's front matter
            m = re.match(r"\s*---\s*\n(.*?)\n---\s*", src, re.S)
            fm = yaml.safe_load(m.group(1)) if m else None
            if isinstance(fm, dict):
                fm.pop("output-file", None)  # smalldocs names pages itself; we rename the file instead
                if conv is not None:
                    for k in ("title", "pagetitle", "description"):
                        if isinstance(fm.get(k), str) and "$" in fm[k]:
                            fm[k] = tex_to_text(fm[k], conv)
                cell.source = "---\n" + yaml.safe_dump(fm, sort_keys=False, allow_unicode=True) + "---\n"
            continue
        if cell.cell_type == "markdown":
            src = linker.fix(src, page)
            if bib is not None:
                src, c = bib.cite(src, "html")
                cited += [k for k in c.keys if k not in cited]
                unknown += c.unknown
            cell.source = src
        for out in cell.get("outputs", []) or []:
            data = out.get("data") or {}
            for mime in ("text/markdown", "text/html"):
                if mime in data:
                    v = data[mime]
                    v = "".join(v) if isinstance(v, list) else v
                    data[mime] = linker.fix(v, page)
            if "text/plain" in data and len(data) == 1:
                txt = data["text/plain"]
                txt = "".join(txt) if isinstance(txt, list) else txt
                if REPR_RE.match(txt):
                    res.warn(f"{nb_rel}: a widget text repr was dropped (end the widget line with ';')")
                    del data["text/plain"]
    for key in dict.fromkeys(unknown):
        res.warn(f"{nb_rel}: unknown citation key @{key} (not in references.bib)")
    if cited:
        nb.cells.append(compat.mk_cell("## References {.unnumbered}\n\n```{=html}\n" + bib.references_html(cited) + "\n```\n", "markdown"))
    return nb


# ------------------------------------------------------------------------------------------ maths (MathML)
def site_math(site: Path) -> list[tuple[str, bool]]:
    "Every formula smalldocs will render on the pages of `site` (its processed notebooks), as (tex, display)."
    md, found = compat.markdown_parser(), []

    def walk(tokens):
        for t in tokens:
            if t.type.startswith("math_"):
                found.append((t.content.strip(), t.type != "math_inline"))
            if t.children:
                walk(t.children)

    for f in sorted(site.rglob("*.ipynb")):
        front, body = compat.notebook_markdown(f.read_text(encoding="utf-8"))
        walk(md.parse(body, {}))
        for k in ("title", "subtitle", "description"):
            if isinstance(front.get(k), str):
                walk(md.parse(front[k], {}))
    return found


smalldocs_mathml = compat.smalldocs_mathml  # smalldocs writes MathML from pandoc inside this context


# ------------------------------------------------------------------------------------------ fallback site
def site_config(proj: Project, pages: dict, out: Path, res: Result) -> dict:
    "The smalldocs config: the top-level _quarto.yml with sidebar entries renamed to the processed notebooks."
    cfg = proj.quarto_yml()
    cfg.pop("metadata-files", None)
    cfg.pop("bibliography", None)  # resolved by tools/citations.py
    html = ((cfg.get("format") or {}).get("html") or {})
    html.pop("html-math-method", None)  # MathML from pandoc (tools/mathml.py), as Quarto's `html-math-method: mathml`
    html.pop("image-lazy-loading", None)  # done in post_process: figures are files with loading="lazy"
    html.pop("lightbox", None)  # done in post_process: a wide figure links to its full-size file
    cfg.pop("execute", None)  # the notebooks were executed by nbclient; `warning: false` is applied by tools/book_pages.py
    # smalldocs compiles no Sass: a theme list keeps its Bootswatch name; theme.scss only switches off the web font,
    # which make_self_contained() removes from smalldocs' copy of the theme
    if isinstance(html.get("theme"), list):
        names_ = [t for t in html["theme"] if not str(t).endswith(".scss")]
        html["theme"] = names_[0] if len(names_) == 1 else names_
    cfg.setdefault("project", {})["output-dir"] = str(out)
    names = {str(k): str(v.with_suffix(".ipynb")) for k, v in pages.items()}

    def rename(items):
        new = []
        for it in items or []:
            if isinstance(it, str):
                if it in names:
                    new.append(names[it])
                elif it.endswith(".ipynb"):
                    res.warn(f"_quarto.yml sidebar: {it} does not exist yet; left out of the sidebar")
                else:
                    new.append(it)
            elif isinstance(it, dict):
                it = dict(it)
                for k in ("href", "file"):
                    if isinstance(it.get(k), str) and it[k] in names:
                        it[k] = names[it[k]]
                if "contents" in it:
                    it["contents"] = rename(it["contents"])
                new.append(it)
        return new

    web = cfg.get("website") or {}
    for bar in web.get("sidebar") if isinstance(web.get("sidebar"), list) else [web.get("sidebar")]:
        if isinstance(bar, dict):
            bar["contents"] = rename(bar.get("contents"))
    nav = web.get("navbar") or {}
    for side in ("left", "right"):
        nav[side] = rename(nav.get(side)) if nav.get(side) else nav.get(side)
    listed = set(sidebar_order(cfg))
    for nb, pg in pages.items():
        if str(pg.with_suffix(".ipynb")) not in listed:
            res.warn(f"{nb} is not in the _quarto.yml sidebar; its page is built but not listed")
    return cfg


def post_process(out: Path, res: Result, conv=None):
    """Convert the maths of raw HTML (reference lists) to MathML, number the tables of contents, move figures into
    files that load lazily, make the pages self-contained (no web font, script or stylesheet from another host),
    rank prose above API names in search, and make sure no raw directive or widget repr survived."""
    from figures import extract_images

    ids = {f.relative_to(out).as_posix(): set(re.findall(r'\bid="([^"]+)"', f.read_text(encoding="utf-8"))) for f in out.rglob("*.html")}
    for f in sorted(out.rglob("*.html")):
        text = f.read_text(encoding="utf-8")
        rel = f.relative_to(out)
        fixed = number_toc(fix_symbol_links(text, rel.as_posix(), ids), rel.as_posix())
        fixed = extract_images(fixed, f, out)[0]
        fixed = compat.add_missing_alt(fixed, "Figure (output of the code above)")
        if conv is not None:
            from mathml import convert_html_math, html_math_spans

            conv.prepare(html_math_spans(fixed))
            fixed = convert_html_math(fixed, conv)
        # an icon-only navbar entry (`icon: github` + `href:`, no text): Quarto shows the icon alone,
        # smalldocs repeats the URL as its text
        fixed = compat.icon_only_nav_links(fixed, rel.as_posix())
        if fixed != text:
            f.write_text(fixed, encoding="utf-8")
            text = fixed
        for pre in re.findall(r"<pre\b.*?</pre>", text, re.S):
            code = htmllib.unescape(re.sub(r"<[^>]+>", "", pre))
            if re.search(r"^\s*#\s*\|", code, re.M):
                res.warn(f"{rel}: a raw `#|` directive is left in a code block")
            if "show_doc(" in code:
                res.warn(f"{rel}: a `show_doc(` call is left on the page")
        if "interactive(children=" in text:
            res.warn(f"{rel}: a widget text repr is left on the page")
        for url in sorted(set(external_assets(text))):
            res.warn(f"{rel}: loads {url} from the network (the site must work offline)")
    make_self_contained(out, res)
    rank_search(out, res)
    if conv is not None and conv.failed:
        for tex in dict.fromkeys(conv.failed):
            res.warn(f"pandoc could not convert the TeX {tex!r} to MathML; it is shown as TeX")


_EXTERNAL = re.compile(r'<(?:script|img|iframe|source|audio|video)\b[^>]*\bsrc="((?:https?:)?//[^"]+)"|<link\b[^>]*\bhref="((?:https?:)?//[^"]+)"[^>]*>')


def external_assets(text: str) -> list[str]:
    "URLs on other hosts that a page loads by itself (scripts, stylesheets, images, frames); links to follow are fine."
    out = []
    for m in _EXTERNAL.finditer(text):
        url = m.group(1) or m.group(2)
        tag = m.group(0)
        if m.group(2) and not re.search(r'rel="(stylesheet|preload|modulepreload|icon)"', tag):
            continue
        out.append(url)
    return out


def section_texts(html: str) -> dict:
    """The prose of each section of a page, {heading id ("" before the first heading): text}, as search should
    index it: the main column without code blocks and outputs (`<pre>`), scripts, styles, TeX annotations of the
    MathML (whose symbols are joined: R̂, not R ̂), folding labels and navigation, cut at every heading with an anchor (`data-anchor-id`, as smalldocs cuts its index)."""
    m = re.search(r"<main\b[^>]*>(.*)</main>", html, re.S)
    body = re.sub(r"<(pre|script|style|annotation|nav|summary)\b.*?</\1>", " ", m.group(1) if m else html, flags=re.S)
    body = re.sub(r"<math\b.*?</math>", lambda f: " " + re.sub(r"<[^>]+>", "", f.group(0)) + " ", body, flags=re.S)
    parts = re.split(r'<h[1-6]\b[^>]*\bdata-anchor-id="([^"]+)"[^>]*>.*?</h[1-6]>', body, flags=re.S)
    chunks = {"": parts[0], **dict(zip(parts[1::2], parts[2::2]))}
    return {k: " ".join(htmllib.unescape(re.sub(r"<[^>]+>", " ", v)).split()) for k, v in chunks.items()}


SEARCH_KEYWORD_WEIGHT = 4   # the weight of the glossary's keywords in search (smalldocs: title and section 2, text 1)


def glossary_keywords(out: Path) -> dict:
    """The glossary of the notation page as search keywords: {href of the section a term links to: its words}. An
    entry reads `**Term (abbreviation), synonym** ([chapter](file.ipynb#section)). ...`; each part of the bold term
    (split at parentheses and commas) is a keyword of the section its first link points to."""
    page = out / "notation.html"
    if not page.is_file():
        return {}
    keys = {}
    for strong, href in re.findall(r'<p><strong>(.*?)</strong>\s*\(<a href="([^"]+)"', page.read_text(encoding="utf-8"), re.S):
        if "#" not in href:
            continue
        text = htmllib.unescape(re.sub(r"<annotation\b.*?</annotation>|<[^>]+>", " ", strong, flags=re.S))
        words = [" ".join(w.split()) for w in re.split(r"[(),]", text) if w.strip()]
        target = posixpath.normpath(href.lstrip("./"))
        keys.setdefault(target, []).extend(words)
    return {k: " · ".join(dict.fromkeys(v)) for k, v in keys.items()}


def rank_search(out: Path, res: Result | None = None):
    """Make search find the section that explains a term. smalldocs indexes each section's whole text, code and
    outputs included, and its search (Fuse) weighs section titles twice as much as text, so "Gibbs" listed every
    `gibbs_*` function, and "R-hat" or "ELBO" the exercises that use them, before the sections that define them.
    - Each entry's text is its section's prose (`section_texts`): code blocks and outputs are not indexed, and a
      `<` in code no longer swallows the text up to the next `>` (smalldocs strips tags from raw code).
    - An API entry (a show_doc section, `.unlisted`) is titled by its name, "name (API reference)", and follows
      the prose entries (Fuse keeps the index order between equal scores).
    - The glossary of the notation page (`glossary_keywords`) gives the section each term links to the term's words
      as `keywords`, a field smalldocs.js is made to search with weight SEARCH_KEYWORD_WEIGHT: searching a term (or
      its abbreviation) lists its defining section first. A glossary link to a section the index lacks is a warning."""
    f = out / "search.json"
    if not f.is_file():
        return
    api, texts = set(), {}
    for page in out.rglob("*.html"):
        rel = page.relative_to(out).as_posix()
        html = page.read_text(encoding="utf-8")
        for ident in compat.unlisted_ids(html, rel):
            api.add(f"{rel}#{ident}")
        texts[rel] = section_texts(html)
    keywords = glossary_keywords(out)
    entries = compat.check_search_entries(json.loads(f.read_text(encoding="utf-8")), str(f))
    prose, names, seen = [], [], set()
    for e in entries:
        href = e.get("href", "")
        page, _, ident = href.partition("#")
        e["text"] = texts.get(page, {}).get(ident, e.get("text", ""))
        if href in keywords:
            e["keywords"] = keywords[href]
            seen.add(href)
        if href in api:
            e["section"] = f"{e.get('section', '')} (API reference)"
            names.append(e)
        else:
            prose.append(e)
    for href in sorted(set(keywords) - seen):
        if res is not None:
            res.warn(f"notation.html: the glossary links {href}, a section search does not index")
    f.write_text(json.dumps(prose + names, ensure_ascii=False), encoding="utf-8")
    js = out / "site_libs" / "smalldocs.js"
    if js.is_file() and keywords:
        js.write_text(compat.add_search_keywords(js.read_text(encoding="utf-8"), SEARCH_KEYWORD_WEIGHT, str(js)), encoding="utf-8")


def make_self_contained(out: Path, res: Result):
    """Drop what the site's own assets would fetch from the network: Bootswatch themes `@import` their web font
    from Google Fonts (the theme's font stack then falls back to the reader's system fonts, as Quarto's
    `$web-font-path: false` does). Any other `url(http...)` or `@import` of another host left in a stylesheet is reported."""
    for css in sorted(out.rglob("*.css")):
        text = css.read_text(encoding="utf-8", errors="replace")
        new = re.sub(r"@import\s+url\((['\"]?)(?:https?:)?//[^)]*\1\)\s*;?", "", text)
        if new != text:
            css.write_text(new, encoding="utf-8")
        for url in re.findall(r"url\((['\"]?)((?:https?:)?//[^)'\"]+)\1\)", new):
            res.warn(f"{css.relative_to(out)}: loads {url[1]} from the network (the site must work offline)")
    for js in sorted(out.rglob("*.js")):
        text = js.read_text(encoding="utf-8", errors="replace")
        for url in sorted(set(re.findall(r"""["'`]((?:https?:)?//cdn[^"'`\s]+)""", text))):
            res.warn(f"{js.relative_to(out)}: refers to {url} (the site must work offline)")


def number_toc(text: str, where: str = "") -> str:
    "Put each section's number in front of its table-of-contents entry, as Quarto does with `number-sections`."
    return compat.number_toc(text, where)


def fix_symbol_links(text: str, page: str, ids: dict) -> str:
    """nbdev links every backticked name it knows (`Adam.step`, `_helper`) to `page.html#name`, but `show_doc`
    documents only public top-level names. A link to `#adam.step` goes to `#adam` (its class) when that exists;
    a link to an anchor that no page has is unwrapped, leaving the code span."""
    def sub(href, inner):
        keep = f'<a href="{href}">{inner}</a>'
        path, _, frag = href.partition("#")
        if not frag or re.match(r"^[a-zA-Z][\w+.-]*:|^//", href):
            return keep
        target = posixpath.normpath(posixpath.join(posixpath.dirname(page), path)) if path else page
        if target not in ids or frag in ids[target]:
            return keep
        head = frag.split(".")[0]
        if head != frag and head in ids[target]:
            return f'<a href="{path}#{head}">{inner}</a>'
        return inner

    return compat.rewrite_code_links(text, sub, page)


def caption_formulas(paths) -> list[str]:
    """The `$...$` formulas that become plain text on the pages (`tex_to_text`): in the cell options (figure
    captions) and in the title cell (title and description) of each notebook. Converting them in one batch first
    spares one pandoc call per formula (a few hundred, about 20 s)."""
    from mathml import inline_formulas

    found = []
    for path in paths:
        cells = json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
        first = next((c for c in cells if c["cell_type"] == "markdown"), None)
        for c in cells:
            src = _src(c)
            if c is first or c["cell_type"] == "raw":
                found += inline_formulas(src)
            elif c["cell_type"] == "code":
                for line in src.split("\n"):
                    if not re.match(r"^\s*#\s*\|", line):
                        break
                    found += inline_formulas(line)
    return list(dict.fromkeys(found))


def build_fallback(proj: Project, staged: dict, out: Path, build: Path, res: Result, show_exports: bool, quiet: bool):
    from citations import Bibliography
    from mathml import MathConverter

    import yaml

    t = time.time()
    ensure_nbdev_lookup(proj)
    site = build / "site"
    if site.exists():
        shutil.rmtree(site)
    site.mkdir(parents=True)
    pages = {nb: page_name(nb) for nb in staged}
    clash = {}
    for nb, pg in pages.items():
        if pg in clash:
            raise SystemExit(f"{nb} and {clash[pg]} would both become {pg}")
        clash[pg] = nb
    # other files beside the notebooks (styles.css, images, data) go into the site project as they are
    for f in sorted(proj.nbs.rglob("*")):
        rel = f.relative_to(proj.nbs)
        if f.is_dir() or any(p.startswith((".", "_")) for p in rel.parts) or f.suffix == ".ipynb":
            continue
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, site / rel)
    bibfile = proj.nbs / ((proj.quarto_yml().get("bibliography")) or "references.bib")
    bib = Bibliography(bibfile) if bibfile.exists() else None
    if bib is None:
        res.warn(f"no bibliography at {bibfile}: citations are left as written")
    linker = Linker(proj, pages)
    conv = MathConverter()
    conv.prepare((tex, False) for tex in caption_formulas(staged.values()))  # one pandoc batch, not one call each
    readme = proj.cfg.get("readme_nb", "index.ipynb")
    with project_cwd(proj.root):  # nbdev's processors read settings.ini from the working directory
        for nb, path in staged.items():
            tn = time.time()
            links = None if str(nb) == readme else notebook_links(proj, nb)
            pnb = process_notebook(path, nb, pages[nb], linker, bib, res, show_exports, conv, links)
            dest = site / pages[nb].with_suffix(".ipynb")
            dest.parent.mkdir(parents=True, exist_ok=True)
            compat.write_nb(pnb, dest)
            say(f"  {nb} -> {pages[nb]} (processed in {time.time() - tn:.1f} s)")
    (site / "_quarto.yml").write_text(yaml.safe_dump(site_config(proj, pages, out, res), sort_keys=False), encoding="utf-8")
    out.parent.mkdir(parents=True, exist_ok=True)
    ts = time.time()
    conv.prepare(site_math(site))
    say(f"  converted {len(conv._mathml)} formula(s) to MathML with pandoc ({time.time() - ts:.1f} s)")
    ts = time.time()
    with smalldocs_mathml(conv):
        sd = compat.smalldocs_build(site, quiet=quiet)
    say(f"  smalldocs wrote {len(pages)} page(s) to {out} ({time.time() - ts:.1f} s)")
    for w in sd.warnings:
        if compat.expected_smalldocs_warning(w):
            continue  # handled here: citations by tools/citations.py, cells were executed by nbclient
        res.warn(f"smalldocs: {w}")
    res.pages = {str(nb): str(pg) for nb, pg in pages.items()}
    ship_files(proj, staged, out, res)
    post_process(out, res, conv)
    say(f"processed and rendered {len(pages)} page(s) ({time.time() - t:.1f} s)")


def ship_files(proj: Project, staged: dict, out: Path, res: Result):
    """Put beside the pages what they link to: each chapter's notebook (as in nbs/, for "Download .ipynb") and the
    frames of its scrubbers (rendered when it was executed)."""
    readme = proj.cfg.get("readme_nb", "index.ipynb")
    for nb, path in staged.items():
        if str(nb) != readme:
            dest = out / NOTEBOOKS_DIR / nb
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(proj.nbs / nb, dest)
        frames = Path(path).with_name(Path(path).stem + ".frames")
        if Path(path) != proj.nbs / nb and frames.is_dir():
            dest = out / SCRUBBERS_DIR / page_name(nb).with_suffix("")
            if dest.exists():
                shutil.rmtree(dest)
            shutil.copytree(frames, dest)


# ------------------------------------------------------------------------------------------ quarto site
def build_quarto(proj: Project, staged: dict, out: Path, build: Path, res: Result, show_exports: bool):
    "nbdev_docs on a staging copy of the project whose nbs/ holds the executed notebooks."
    import yaml

    res.engine = "quarto"
    stage = build / "quarto"
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir(parents=True)
    for f in ("settings.ini", "setup.py", "README.md", "LICENSE"):
        if (proj.root / f).exists():
            shutil.copy2(proj.root / f, stage / f)
    shutil.copytree(proj.lib, stage / proj.lib.relative_to(proj.root), ignore=shutil.ignore_patterns("__pycache__"))
    snbs = stage / proj.nbs.relative_to(proj.root)
    shutil.copytree(proj.nbs, snbs, symlinks=False, ignore=shutil.ignore_patterns("*.ipynb", "_proc", ".ipynb_checkpoints"))
    (snbs / "_quarto.yml").write_text(yaml.safe_dump(yaml.safe_load((proj.root / "_quarto.yml").read_text()), sort_keys=False))
    for nb, path in staged.items():
        dest = snbs / nb
        dest.parent.mkdir(parents=True, exist_ok=True)
        n = compat.read_nb(path)
        links = None if str(nb) == proj.cfg.get("readme_nb", "index.ipynb") else notebook_links(proj, nb)
        prepare_for_docs(n, show_exports, nb, links)
        compat.write_nb(n, dest)
    ensure_nbdev_lookup(proj)
    # proc_nbs calls `FilterDefaults()(nb)` for each notebook: use the same output-preserving filters as the
    # offline build (this works because n_workers=0 keeps proc_nbs in this process)
    settings = page_settings(proj.quarto_yml())
    with compat.nbdev_docs_filters(lambda: doc_filters("notebook", res.warn, settings)), project_cwd(stage):
        compat.nbdev_docs_in_process()  # in-process, so the lookup and filters above apply
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(stage / proj.doc_path.name, out)
    ship_files(proj, staged, out, res)
    res.pages = {str(nb): str(page_name(nb)) for nb in staged}


# ------------------------------------------------------------------------------------------ main
def build_site(root: Path, out: Path | None = None, build: Path | None = None, *, execute=True, patterns=None,
               fallback=False, export=True, timeout=600, force=False, show_exports=True, quiet=True,
               scrubber_budget: float = 30.0) -> Result:
    t0 = time.time()
    proj = Project(root)
    sys.path.insert(0, str(proj.root))
    out = (out or proj.root / proj.doc_path).resolve()
    build = (build or proj.root / "_build").resolve()
    res = Result(out=out)
    if export:
        with project_cwd(proj.root):
            export_package(proj)
    nbs = proj.notebooks()
    if not nbs:
        raise SystemExit(f"no notebooks in {proj.nbs}")
    say(f"staging {len(nbs)} notebook(s) in {build / 'exec'}")
    staged = stage_notebooks(proj, nbs, build, res, execute=execute, patterns=patterns, timeout=timeout, force=force,
                             budget=scrubber_budget)
    if shutil.which("quarto") and not fallback:
        say("quarto found: building with nbdev_docs")
        build_quarto(proj, staged, out, build, res, show_exports)
    else:
        say("building the offline site (nbdev processors + smalldocs)" + ("" if fallback else "; quarto is not installed"))
        build_fallback(proj, staged, out, build, res, show_exports, quiet)
    if res.exec_times:
        say("execution times: " + ", ".join(f"{k} {v:.1f} s" for k, v in sorted(res.exec_times.items(), key=lambda x: -x[1])))
    say(f"built the site in {time.time() - t0:.1f} s with {len(res.warnings)} warning(s)")
    say(f"open {out / 'index.html'}")
    return res


def serve(out: Path, port: int):
    import functools
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(out))
    with ThreadingHTTPServer(("127.0.0.1", port), handler) as httpd:
        say(f"serving {out} at http://127.0.0.1:{httpd.server_address[1]}/ (Ctrl-C to stop)")
        try:
            httpd.serve_forever()
        except KeyboardInterrupt:
            say("stopped")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", type=Path, default=HERE.parent, help="the project (where settings.ini is); default: this repo")
    p.add_argument("--out", type=Path, help="output folder (default: settings.ini doc_path, _docs)")
    p.add_argument("--build-dir", type=Path, help="staging folder for executed and processed notebooks (default: _build)")
    p.add_argument("--no-exec", action="store_true", help="use the notebooks as they are, without executing them")
    p.add_argument("--exec-glob", metavar="PATTERN", help="execute only notebooks matching PATTERN ('a*.ipynb|b.ipynb'); others use a fresh cache or are shown unexecuted")
    p.add_argument("--force", action="store_true", help="execute again even when the cache is fresh")
    p.add_argument("--timeout", type=int, default=600, help="per-cell execution timeout in seconds")
    p.add_argument("--fallback", action="store_true", help="build the offline site even if quarto is installed")
    p.add_argument("--no-export", action="store_true", help="skip nbdev_export (use the package as it is)")
    p.add_argument("--hide-export-source", action="store_true", help="nbdev's default: hide the code of `#| export` cells (only show_doc)")
    p.add_argument("--scrubber-budget", type=float, default=30.0, metavar="SECONDS",
                   help="time to spend rendering the frames of each interactive widget (default 30)")
    p.add_argument("--strict", action="store_true", help="exit 1 when the build has warnings (unknown citations, broken links, ...)")
    p.add_argument("--verbose", action="store_true", help="print smalldocs' progress")
    p.add_argument("--serve", action="store_true", help="serve the site on 127.0.0.1 after building it")
    p.add_argument("--port", type=int, default=8000, help="port for --serve (default 8000)")
    a = p.parse_args(argv)
    patterns = [s.strip() for s in a.exec_glob.split("|") if s.strip()] if a.exec_glob else None
    res = build_site(a.root, a.out, a.build_dir, execute=not a.no_exec, patterns=patterns, fallback=a.fallback,
                     export=not a.no_export, timeout=a.timeout, force=a.force, show_exports=not a.hide_export_source,
                     quiet=not a.verbose, scrubber_budget=a.scrubber_budget)
    if a.strict and res.warnings:
        say(f"--strict: {len(res.warnings)} warning(s)")
        return 1
    if a.serve:
        serve(res.out, a.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
