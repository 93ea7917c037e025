"""Seed sweep: rerun the statistical tests with every algorithm seed shifted, and tabulate failures and margins.

    python tools/seed_sweep.py [PATHS ...] [--offsets 20] [--first 0] [-n 2] [--all-rows] [--fast-under S]

For each offset K in first .. first+offsets-1 it runs `pytest PATHS --seed-offset K --record-margins ...`
(default PATHS: every tests/test_*.py except the site, README and nbdev-sync checks, which use no seeds), then
prints two tables:

* per test: how many of the runs failed, and the worst (smallest) z over its assertions;
* per assertion with a margin (see tools/margins.py): failures, min / mean / sd of the margin over the runs, and
  z = mean / sd, the number of spreads between the typical value and the bound. Rows with z below 4 are shown
  (all rows with --all-rows). A deterministic assertion has sd 0 and z = inf.

Long sweep (`--fast-under S`): the first offset runs every test as above and measures each one (junit time: set-up,
call and tear-down, so a module fixture is charged to the first test that uses it); the later offsets rerun only the
tests that use the `seed` fixture (the others do not change with the offset; conftest's `--list-seeded`) and took
under S seconds there. A rare failure (a local optimum reached once in a hundred starts) needs hundreds of offsets to
be seen at all: at 200 offsets a test that fails with probability p per run fails at least once with probability
1 - (1 - p)^200 (0.87 for p = 1 %, 0.63 for p = 0.5 %).

Exit status 1 when any run failed. `make seed-sweep` calls this with 20 offsets; `make seed-sweep-long` with
`--offsets 200 --fast-under 2`.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NO_SEEDS = {"test_site.py", "test_readme.py", "test_nbdev_sync.py", "test_lock.py", "test_compat.py"}


def default_paths():
    return [str(p.relative_to(ROOT)) for p in sorted((ROOT / "tests").glob("test_*.py")) if p.name not in NO_SEEDS]


def run(paths, offset, work, jobs, extra):
    out = work / f"offset_{offset}"
    xml = work / f"offset_{offset}.xml"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", *paths, "--seed-offset", str(offset),
           "--record-margins", str(out), "--junitxml", str(xml), "-W", "ignore"]
    cmd += ["-n", str(jobs), "--dist", "loadfile"] if jobs > 1 else ["-p", "no:xdist"]
    cmd += extra
    t = time.time()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    tests, times = {}, {}
    if xml.exists():
        for case in ET.parse(xml).getroot().iter("testcase"):
            name = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
            bad = any(child.tag in ("failure", "error") for child in case)
            skipped = any(child.tag == "skipped" for child in case)
            if not skipped:
                tests[name] = not bad
                times[name] = float(case.get("time") or 0.0)
    records = []
    for f in sorted(out.glob("*.jsonl")):
        records += [json.loads(line) for line in f.read_text().splitlines()]
    return tests, records, time.time() - t, proc, times


def seeded_tests(paths, work):
    "Node ids of the tests under `paths` that use the `seed` fixture (tests/conftest.py --list-seeded)."
    listing = work / "seeded.txt"
    cmd = [sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:xdist", "-p", "no:randomly", *paths,
           "--list-seeded", str(listing)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if not listing.exists():
        sys.exit(f"could not list the seeded tests:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return set(listing.read_text().split())


def summarise(margins):
    ms = [m for m in margins if m is not None]
    if not ms:
        return None
    n = len(ms)
    mean = sum(ms) / n
    sd = math.sqrt(sum((m - mean) ** 2 for m in ms) / (n - 1)) if n > 1 else 0.0
    z = math.inf if sd <= 1e-12 * max(1.0, abs(mean)) else mean / sd
    return min(ms), mean, sd, z


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--offsets", type=int, default=20)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("-n", "--jobs", type=int, default=1, help="pytest-xdist workers per run")
    ap.add_argument("--all-rows", action="store_true")
    ap.add_argument("--z-show", type=float, default=4.0, help="show assertions with z below this (default 4)")
    ap.add_argument("--keep", default=None, help="keep the records in this folder")
    ap.add_argument("-m", dest="marker", default=None, help="pytest -m expression (e.g. slow)")
    ap.add_argument("--fast-under", type=float, default=None, metavar="S",
                    help="after the first offset, rerun only the seeded tests that took under S seconds there")
    args = ap.parse_args(argv)
    paths = args.paths or default_paths()
    extra = ["-m", args.marker] if args.marker else []
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="seed_sweep_"))
    work.mkdir(parents=True, exist_ok=True)

    outcomes = defaultdict(list)             # test -> [passed?]
    per_assert = defaultdict(list)           # (test, assert id) -> [margin]
    per_assert_fail = defaultdict(int)
    texts = {}
    offsets = range(args.first, args.first + args.offsets)
    run_paths = paths
    for k in offsets:
        tests, records, secs, proc, times = run(run_paths, k, work, args.jobs, extra)
        n_bad = sum(not ok for ok in tests.values())
        print(f"offset {k:3d}: {len(tests)} tests, {n_bad} failed, {secs:.0f} s", flush=True)
        if args.fast_under is not None and k == args.first:
            seeded = seeded_tests(paths, work)
            run_paths = sorted(n for n, s in times.items() if n in seeded and s < args.fast_under)
            if not run_paths:
                sys.exit(f"no seeded test took under {args.fast_under:g} s")
            slow = sorted(n for n in times if n in seeded and times[n] >= args.fast_under)
            (work / "fast_tests.txt").write_text("".join(f"{n}\n" for n in run_paths))
            print(f"long sweep: {len(run_paths)} of {len(seeded)} seeded tests took under {args.fast_under:g} s "
                  f"({sum(times[n] for n in run_paths):.0f} s in all at offset {k}); they run at every later offset "
                  f"(list in {work / 'fast_tests.txt'}); {len(slow)} slower seeded tests ran at this offset only", flush=True)
        if not tests:
            print(proc.stdout[-3000:], proc.stderr[-3000:], sep="\n")
        for name, ok in tests.items():
            outcomes[name].append(ok)
            if not ok:
                print(f"    FAILED {name}", flush=True)
        seen = set()
        for r in records:
            key = (r["where"], r["id"] + (f"@{r['occ']}" if r.get("occ") else ""))   # a loop's k-th pass: its own row
            texts[key] = r["text"]
            per_assert[key].append(r["margin"])
            if not r["ok"]:
                per_assert_fail[key] += 1
            seen.add(key)

    print(f"\n## Seed sweep: {len(outcomes)} tests x {len(offsets)} offsets ({args.first}..{offsets[-1]})\n")
    worst = {}
    for (test, ident), ms in per_assert.items():
        s = summarise(ms)
        if s is not None:
            worst[test] = min(worst.get(test, math.inf), s[3])
    print("| test | failures | worst z |")
    print("|---|---:|---:|")
    total_fail = 0
    for test in sorted(outcomes):
        fails = sum(not ok for ok in outcomes[test])
        total_fail += fails
        z = worst.get(test)
        if args.all_rows or fails or (z is not None and z < args.z_show):
            print(f"| {test} | {fails}/{len(outcomes[test])} | {'-' if z is None else f'{z:.1f}'} |")
    n_ok = sum(1 for t in outcomes if not any(not ok for ok in outcomes[t]))
    print(f"\n{n_ok} of {len(outcomes)} tests passed at every offset; {total_fail} failed runs in all.")
    print(f"(tests not listed: no failure and worst z >= {args.z_show:g}, or no margin recorded)\n")

    print("| assertion | failures | min margin | mean | sd | z |")
    print("|---|---:|---:|---:|---:|---:|")
    rows = []
    for key, ms in per_assert.items():
        s = summarise(ms)
        if s is None:
            continue
        rows.append((s[3], key, s, per_assert_fail[key], len(ms)))
    for z, key, s, fails, n in sorted(rows, key=lambda r: r[0]):
        if args.all_rows or fails or z < args.z_show:
            text = texts[key] if len(texts[key]) < 70 else texts[key][:67] + "..."
            print(f"| {key[0].split('::', 1)[-1]} l.{key[1].rsplit(':', 1)[-1]} `{text}` | {fails}/{n} | "
                  f"{s[0]:.3g} | {s[1]:.3g} | {s[2]:.3g} | {z:.1f} |")
    print(f"\n{len(rows)} assertions with a margin; records in {work}")
    return 1 if total_fail else 0


if __name__ == "__main__":
    sys.exit(main())
