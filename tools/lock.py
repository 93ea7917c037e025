"""Print the requirements that `make lock` resolves, read from settings.ini (the one place they are declared).

    python tools/lock.py book     # requirements + dev_requirements: the book's environment (make test, make site)
    python tools/lock.py oldest   # requirements at their declared minimums + the test runner (make test-oldest)

`make lock` pipes this into `uv pip compile`: the book at the newest versions the ranges allow for every
Python >= 3.11 (smalldocs needs 3.11), the oldest set with `--resolution lowest-direct` for `min_python`.
"""
import sys
from configparser import ConfigParser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the test runner for the oldest set: lower bounds keep a lowest-direct resolution away from ancient releases
OLDEST_TEST_TOOLS = ["pytest>=8", "pytest-xdist>=3.5", "tqdm>=4.66"]


def requirements(kind):
    cfg = ConfigParser(delimiters=["="])
    cfg.read(ROOT / "settings.ini", encoding="utf-8")
    d = cfg["DEFAULT"]
    if kind == "book":
        return d["requirements"].split() + d["dev_requirements"].split()
    if kind == "oldest":
        return d["requirements"].split() + OLDEST_TEST_TOOLS
    raise SystemExit(f"tools/lock.py: kind must be 'book' or 'oldest', not {kind!r}")


if __name__ == "__main__":
    print("\n".join(requirements(sys.argv[1] if len(sys.argv) > 1 else "book")))
