"""Regenerate every chapter's figures into figures/<chapter>/ as PNG and SVG (`make figures`).

Usage: python tools/make_figures.py [--out figures] [--chapters vi mcmc ...] [--formats png svg]
"""
import argparse
import os

os.environ.setdefault("MPLBACKEND", "Agg")

from bayesnotes.plotting import CHAPTERS, regenerate_all


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="figures", help="parent folder (default: figures)")
    p.add_argument("--chapters", nargs="*", default=None, help=f"subset of {CHAPTERS}")
    p.add_argument("--formats", nargs="*", default=["png", "svg"])
    a = p.parse_args(argv)
    done = regenerate_all(a.out, a.chapters, tuple(a.formats), progress=True)
    for ch, paths in done.items():
        print(f"{ch:12s} {len(paths):3d} files in {a.out}/{ch}/")


if __name__ == "__main__":
    main()
