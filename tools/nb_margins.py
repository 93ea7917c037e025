"""Notebook assert margins over algorithm seeds.

    python tools/nb_margins.py [NOTEBOOKS ...] [--seeds 20] [--first 0] [-j 1] [--all-rows]

Each chapter writes its algorithm seeds as `SEED + k`, with `SEED = int(os.environ.get("BAYESNOTES_SEED", 0))`
(data seeds stay literal). This script executes every notebook (default: all of nbs/) once per SEED in
first .. first+seeds-1, in a fresh IPython shell whose `assert` statements record their margins
(tools/margins.py), and prints, per assertion: failures, min / mean / sd of the margin over the seeds, and
the ratio z = mean / sd. The issue's rule: no failure, and every statistical assertion at least 2 spreads
from its bound (z >= 2); rows below `--z-show` (default 4) are listed, all rows with --all-rows. A cell that
raises is reported as a failure of that cell. Exit status 1 on any failure or any z < 2.
"""
import argparse
import ast
import builtins
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import margins  # noqa: E402
from seed_sweep import summarise  # noqa: E402


def worker(nb_path, seed, out):
    "Execute one notebook with BAYESNOTES_SEED=seed, recording assert margins into `out` (JSON lines)."
    import nbformat
    os.environ["BAYESNOTES_SEED"] = str(seed)
    os.environ.setdefault("MPLBACKEND", "Agg")
    nb_path = Path(nb_path).resolve()
    os.chdir(nb_path.parent)
    sys.path.insert(0, str(nb_path.parent))
    from IPython.core.interactiveshell import InteractiveShell

    class Rewriter(ast.NodeTransformer):
        label = ""

        source = None

        def visit(self, node):
            return margins.rewrite(node, label=self.label, skip_defs=True, source=self.source)

    shell = InteractiveShell.instance()
    rw = Rewriter()
    shell.ast_transformers.append(rw)
    builtins.__bn_check__ = margins.check
    nb = nbformat.read(nb_path, as_version=4)
    name = nb_path.name
    errors = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        rw.label, rw.source = f"cell {i}", cell.source
        margins.context["where"] = name
        res = shell.run_cell(cell.source, silent=True)
        err = res.error_before_exec or res.error_in_exec
        if err is not None:
            errors.append({"where": name, "id": f"cell {i}:error", "text": f"{type(err).__name__}: {err}"[:300],
                           "ok": False, "margin": None})
    margins.flush(out)
    with open(out, "a") as f:
        for e in errors:
            f.write(json.dumps(e) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("notebooks", nargs="*")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("-j", "--jobs", type=int, default=1)
    ap.add_argument("--all-rows", action="store_true")
    ap.add_argument("--z-show", type=float, default=4.0)
    ap.add_argument("--keep", default=None)
    ap.add_argument("--worker", nargs=3, metavar=("NB", "SEED", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args.worker[0], int(args.worker[1]), args.worker[2])
        return 0
    nbs = [Path(p) for p in args.notebooks] or sorted(p for p in (ROOT / "nbs").glob("[0-9]*.ipynb"))
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="nb_margins_"))
    work.mkdir(parents=True, exist_ok=True)
    seeds = list(range(args.first, args.first + args.seeds))
    env = {**os.environ, "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1", "PYDEVD_DISABLE_FILE_VALIDATION": "1"}

    def job(nb_seed):
        nb, s = nb_seed
        out = work / f"{nb.stem}_{s}.jsonl"
        out.unlink(missing_ok=True)
        t = time.time()
        p = subprocess.run([sys.executable, __file__, "--worker", str(nb.resolve()), str(s), str(out)],
                           env=env, capture_output=True, text=True)
        if p.returncode and not out.exists():
            out.write_text(json.dumps({"where": nb.name, "id": "kernel:error", "text": p.stderr[-300:],
                                       "ok": False, "margin": None}) + "\n")
        print(f"{nb.name} SEED={s}: {time.time() - t:.0f} s", flush=True)
        return nb, s, out

    jobs = [(nb, s) for nb in nbs for s in seeds]
    with ThreadPoolExecutor(args.jobs) as ex:
        results = list(ex.map(job, jobs))

    per = defaultdict(list)
    fails = defaultdict(int)
    texts = {}
    for nb, s, out in results:
        for line in out.read_text().splitlines() if out.exists() else []:
            r = json.loads(line)
            key = (r["where"], r["id"] + (f"@{r['occ']}" if r.get("occ") else ""))   # a loop's k-th pass: its own row
            texts[key] = r["text"]
            per[key].append(r["margin"])
            fails[key] += not r["ok"]

    print(f"\n## Notebook assert margins: {len(nbs)} notebooks x {len(seeds)} seeds "
          f"(SEED = {seeds[0]}..{seeds[-1]})\n")
    print("| notebook | assertion | failures | min margin | mean | sd | z = mean/sd |")
    print("|---|---|---:|---:|---:|---:|---:|")
    bad, rows = 0, []
    for key, ms in per.items():
        s = summarise(ms)
        z = s[3] if s else None
        rows.append((z if z is not None else float("inf"), key, s, fails[key], len(ms)))
    n_low = 0
    for z, key, s, nf, n in sorted(rows, key=lambda r: (r[0], r[1])):
        low = s is not None and z < 2
        bad += nf > 0 or low
        n_low += low
        if args.all_rows or nf or (s is not None and z < args.z_show):
            text = texts[key] if len(texts[key]) < 70 else texts[key][:67] + "..."
            stats = f"{s[0]:.3g} | {s[1]:.3g} | {s[2]:.3g} | {z:.1f}" if s else "- | - | - | -"
            print(f"| {key[0]} | {key[1].replace('cell ', 'c')} `{text}` | {nf}/{n} | {stats} |")
    n_margin = sum(1 for r in rows if r[2] is not None)
    print(f"\n{len(rows)} assertions ({n_margin} with a margin); {sum(r[3] > 0 for r in rows)} ever failed; "
          f"{n_low} with z < 2. Records in {work}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
