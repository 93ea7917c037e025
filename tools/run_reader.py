"""`make test-reader`: run every notebook that the website's "Open in Colab" and "Launch Binder" links open, the way a
reader's Colab or Binder runs it, and fail if one does not run.

A reader's machine has what Colab has plus the install cell at the top of each chapter, not the book's development
stack. So each notebook is executed

* by a kernel of a separate Python (`--python`, the venv `make test-reader` builds with only the lean package, installed
  from the clone as `pip install .` would install it from the repository URL, plus ipykernel, ipywidgets and matplotlib):
  no nbdev, pytest, playwright, fastcore, tqdm or ArviZ, so an import of one of them that is not guarded fails here;
* as a copy alone in an empty temporary directory (Colab opens one notebook, without the repository around it), so a
  cell that reads a file of the repository fails here;
* with every cell run in order and any error failing the notebook; the install cell must find the package importable
  and install nothing (it would fail anyway: the repository URL is not reachable from the test machine).

The notebooks are those of the chapters (nbs/0*.ipynb), "Use it on your own model", the problem sets and their
solutions; the prose pages (how to use the book, contributing) have no launch links (tools/build_site.py). Two
notebooks run at a time (two cores); each one's time is printed, and the run fails at the end if any notebook failed.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / "nbs"
KERNEL = "bayesnotes-reader"


def reader_notebooks() -> list[Path]:
    "Every notebook with Colab and Binder links that a reader runs: chapters, own-model guide, problems, solutions."
    return (sorted(NBS.glob("0*.ipynb")) + [NBS / "own_model.ipynb"]
            + sorted((NBS / "exercises").glob("*.ipynb")) + sorted((NBS / "solutions").glob("*.ipynb")))


def write_kernelspec(python: str, where: Path) -> Path:
    "A kernelspec `bayesnotes-reader` running ipykernel in `python`, under `where`/kernels (put on JUPYTER_PATH)."
    spec = where / "kernels" / KERNEL
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}", "--log-level=ERROR"],
        "display_name": "bayesnotes reader (lean package only)", "language": "python",
        "env": {"MPLBACKEND": "Agg", "PYTHONPATH": ""}}))
    return where


def run_one(nb_path: str, timeout: int) -> tuple[str, float, str | None]:
    "Execute one notebook as a reader's Colab would; return (name, seconds, None or the error)."
    import nbformat
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    src = Path(nb_path)
    name = src.relative_to(NBS).as_posix()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="reader-") as tmp:
        copy = Path(tmp) / src.name
        shutil.copy(src, copy)
        nb = nbformat.read(copy, as_version=4)
        # IPC sockets in the notebook's own directory: two kernels started at once cannot race for the same TCP port
        km = KernelManager(kernel_name=KERNEL, transport="ipc", ip=str(Path(tmp) / "kernel"))
        client = NotebookClient(nb, km=km, timeout=timeout, startup_timeout=120, allow_errors=False,
                                resources={"metadata": {"path": tmp}})
        try:
            client.execute()
        except CellExecutionError as e:
            first = str(e).strip().splitlines()
            tail = [l for l in first if l.strip()][-1:] or ["?"]
            cell = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code" and any(
                o.get("output_type") == "error" for o in c.get("outputs", []))), None)
            return name, time.perf_counter() - t0, f"cell {cell}: {tail[0][:300]}"
        except (CellTimeoutError, DeadKernelError) as e:
            return name, time.perf_counter() - t0, f"{type(e).__name__}: {str(e)[:300]}"
        finally:                  # a kernel manager passed in is not shut down by nbclient
            if km.has_kernel:
                km.shutdown_kernel(now=True)
        return name, time.perf_counter() - t0, None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--python", required=True, help="the reader's Python (a venv with the lean package, ipykernel, "
                                                   "ipywidgets and matplotlib)")
    p.add_argument("--jobs", type=int, default=2, help="notebooks run at a time (default 2)")
    p.add_argument("--timeout", type=int, default=900, help="seconds a cell may take (default 900)")
    p.add_argument("notebooks", nargs="*", help="notebooks to run (default: every one with launch links)")
    args = p.parse_args(argv)

    # absolute: the kernel starts in the notebook's temporary folder, where a relative path finds nothing (and
    # jupyter_client then waits for a kernel that never comes)
    python = os.path.abspath(shutil.which(args.python) or args.python)
    if not os.access(python, os.X_OK):
        print(f"run_reader: {python} is not an executable Python", file=sys.stderr)
        return 2
    missing = [m for m in ("nbdev", "pytest", "playwright", "fastcore", "tqdm", "arviz")
               if os.system(f'"{python}" -c "import {m}" >/dev/null 2>&1') == 0]
    if missing:
        print(f"run_reader: {python} has {', '.join(missing)}: not a reader's environment", file=sys.stderr)
        return 2
    if os.system(f'"{python}" -c "import bayesnotes, ipykernel, ipywidgets, matplotlib" >/dev/null 2>&1') != 0:
        print(f"run_reader: {python} cannot import bayesnotes, ipykernel, ipywidgets and matplotlib", file=sys.stderr)
        return 2
    nbs = [Path(n).resolve() for n in args.notebooks] or reader_notebooks()
    with tempfile.TemporaryDirectory(prefix="reader-kernel-") as kdir:
        os.environ["JUPYTER_PATH"] = str(write_kernelspec(python, Path(kdir)))
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(var, "1")
        os.environ.pop("PYTHONPATH", None)
        t0, failed = time.perf_counter(), []
        # the longest first, so that two workers finish together (sizes stand in for run times)
        order = sorted(nbs, key=lambda q: -q.stat().st_size)
        # fresh interpreters (spawn), not forks of this process: a fork shares the parent's event-loop and ZMQ state
        with ProcessPoolExecutor(max_workers=args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(run_one, str(q), args.timeout) for q in order]
            for f in as_completed(futures):
                name, secs, err = f.result()
                print(f"{'FAIL' if err else 'ok  '} {secs:6.1f} s  {name}" + (f"\n       {err}" if err else ""), flush=True)
                if err:
                    failed.append(name)
    print(f"{len(nbs) - len(failed)} of {len(nbs)} notebooks ran in the reader's environment "
          f"({time.perf_counter() - t0:.0f} s)" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
