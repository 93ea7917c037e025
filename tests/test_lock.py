"""The pinned environments agree with what settings.ini declares.

`requirements/book.txt` (the book's environment, `make test` and `make site`) must pin every declared
requirement to a version inside its range, and `requirements/oldest.txt` (`make test-oldest`) must pin every
runtime requirement at exactly its declared minimum: otherwise the minimum is a claim nobody tests.
`make lock` rewrites both from settings.ini.
"""
from configparser import ConfigParser
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


def _settings():
    cfg = ConfigParser(delimiters=["="])
    cfg.read(ROOT / "settings.ini", encoding="utf-8")
    return cfg["DEFAULT"]


def _pins(path, env=None):
    "name -> pinned Version for the lines of a lock whose marker holds in `env` (default: this interpreter)."
    pins = {}
    for line in (ROOT / path).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        (spec,) = req.specifier
        assert spec.operator == "==", f"{path}: {line!r} is not an exact pin"
        pins[canonicalize_name(req.name)] = Version(spec.version)
    return pins


def test_book_lock_pins_every_declared_requirement_inside_its_range():
    d = _settings()
    declared = [Requirement(r) for r in d["requirements"].split() + d["dev_requirements"].split()]
    for minor in (11, 12, 13):     # the lock is universal over Python >= 3.11
        env = {"python_version": f"3.{minor}", "python_full_version": f"3.{minor}.0"}
        pins = _pins("requirements/book.txt", env)
        for req in declared:
            name = canonicalize_name(req.name)
            assert name in pins, f"{req.name} is declared in settings.ini but not pinned in requirements/book.txt"
            assert req.specifier.contains(pins[name], prereleases=True), \
                f"book lock pins {req.name}=={pins[name]} outside {req.specifier}: run `make lock`"


def test_oldest_lock_pins_the_declared_minimums():
    d = _settings()
    pins = _pins("requirements/oldest.txt", {"python_version": d["min_python"],
                                              "python_full_version": d["min_python"] + ".0"})
    for r in d["requirements"].split():
        req = Requirement(r)
        lows = [s.version for s in req.specifier if s.operator == ">="]
        assert lows, f"{r}: every runtime requirement needs a declared minimum"
        assert pins[canonicalize_name(req.name)] == Version(lows[0]), \
            f"oldest lock has {req.name}=={pins[canonicalize_name(req.name)]}, declared minimum {lows[0]}: `make lock`"

