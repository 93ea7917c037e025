"""The API as one library: every public parameter documented, an acyclic module graph that reads like the book."""
import ast
import importlib
import inspect
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "bayesnotes"
MODULES = sorted(p.stem for p in PKG.glob("*.py") if not p.stem.startswith("_"))


def _public_callables(mod, with_bases=False):
    """(qualified name, callable) for every function of `__all__` and every public method of its classes; with
    `with_bases`, (qualified name, callable, the same-named methods of the base classes it overrides)."""
    for name in getattr(mod, "__all__", []):
        obj = getattr(mod, name)
        if inspect.isclass(obj):
            if issubclass(obj, tuple) and hasattr(obj, "_fields"):      # NamedTuple: fields are documented inline
                continue
            for k, v in vars(obj).items():
                if (k == "__init__" or not k.startswith("_")) and inspect.isfunction(v):
                    bases = [vars(b)[k] for b in obj.__mro__[1:] if k in vars(b) and inspect.isfunction(vars(b)[k])]
                    yield (f"{name}.{k}", v, bases) if with_bases else (f"{name}.{k}", v)
        elif inspect.isfunction(obj) and obj.__module__ == mod.__name__:
            yield (name, obj, []) if with_bases else (name, obj)


def _undocumented(fn, bases=()):
    """Parameters without a docments comment. An override inherits the comments of the method it overrides, as
    `inspect.getdoc` inherits docstrings: a subclass's M, logG or sample_transition takes the base's arguments."""
    docments = pytest.importorskip("fastcore.docments").docments   # nbdev's dependency, not the package's
    params = [p for p in inspect.signature(fn).parameters.values() if p.name not in ("self", "cls")]
    if not params:
        return []
    docs = {}
    for f in reversed([fn, *bases]):
        docs.update({k: v for k, v in docments(f, args_kwargs=True).items() if v})   # *args, **kwargs need one too
    return [p.name for p in params if not docs.get(p.name)]


@pytest.mark.parametrize("modname", MODULES)
def test_every_public_parameter_has_its_own_docment(modname):
    "fastcore.docments finds a comment for each parameter of each public function and method (show_doc's tables)."
    mod = importlib.import_module(f"bayesnotes.{modname}")
    missing = {q: m for q, f, bases in _public_callables(mod, with_bases=True) if (m := _undocumented(f, bases))}
    assert not missing, f"bayesnotes.{modname}: parameters without their own comment: {missing}"


@pytest.mark.parametrize("modname", MODULES)
def test_help_shows_every_parameter(modname, monkeypatch):
    """help() (pydoc), Jupyter's ? and IDEs read docstrings only: each public function's and method's docstring (a
    class's for its __init__) carries a numpydoc Parameters section listing every parameter with its docment, and each
    NamedTuple an Attributes section with every field (issue 32). The docments read at import must be fastcore's."""
    import pydoc
    fc_docments = pytest.importorskip("fastcore.docments")
    docments = fc_docments.docments
    # fastcore also reads numpydoc sections, which are now generated from the docments: compare the comments alone
    monkeypatch.setattr(fc_docments, "parse_docstring", lambda s: {"Parameters": {}, "Returns": {}})
    from bayesnotes.utils import docments_of
    mod = importlib.import_module(f"bayesnotes.{modname}")
    bad = {}
    for q, f, bases in _public_callables(mod, with_bases=True):
        keys = set(inspect.signature(f).parameters) | {"return"}
        fc = {k: v for k, v in docments(f, args_kwargs=True).items() if v}
        own = {k: v for k, v in docments_of(f).items() if v and k in keys}
        if own != fc:
            bad[q] = f"docments differ from fastcore's: {own} vs {fc}"
            continue
        shown = vars(mod)[q.split(".")[0]] if q.endswith(".__init__") else f
        section = (inspect.getdoc(shown) or "").partition("Parameters\n----------\n")[2]
        docs = {}
        for g in reversed([f, *bases]):
            docs.update({k: v for k, v in docments_of(g).items() if v})
        for p in inspect.signature(f).parameters.values():
            if p.name in ("self", "cls"):
                continue
            star = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "")
            first = (docs.get(p.name) or "").splitlines()[:1]
            if not re.search(rf"^\s*{re.escape(star + p.name)}( :|$)", section, re.M) or (first and first[0] not in section):
                bad.setdefault(q, []).append(p.name)
    for name in getattr(mod, "__all__", []):
        obj = getattr(mod, name)
        if inspect.isclass(obj) and issubclass(obj, tuple) and hasattr(obj, "_fields") and obj.__module__ == mod.__name__:
            attrs = (obj.__doc__ or "").partition("Attributes\n----------")[2]
            missing = [k for k in obj._fields if not re.search(rf"^{k} :", attrs, re.M)]
            if missing:
                bad[name] = missing
    assert not bad, f"bayesnotes.{modname}: help() misses these parameters: {bad}"
    if modname == "mcmc":   # what help() prints is that docstring
        text = pydoc.render_doc(mod.sample, renderer=pydoc.plaintext)
        assert "Parameters" in text and "n_chains : int, default 4" in text and "chains, run concurrently" in text


def test_parameter_docs_cost_little_at_import():
    "The Parameters sections are made at import from the `def` headers only: all modules together in well under 1 s."
    code = ("import sys, time, bayesnotes.utils as u\n"
            "sys.meta_path = [f for f in sys.meta_path if type(f).__name__ != '_DocsFinder']\n"
            f"mods = [__import__('bayesnotes.' + m, fromlist=['x']) for m in {MODULES!r}]\n"
            "t = time.process_time(); n = sum(u.add_parameter_docs(m) for m in mods)\n"
            "print(n, time.process_time() - t)")
    n, secs = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert int(n) > 300 and float(secs) < 1.0, (n, secs)


def _imports_of(modname):
    "Sibling modules imported at module level (from .x import ...), read from the source."
    tree = ast.parse((PKG / f"{modname}.py").read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            out.add(node.module.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("bayesnotes."):
            out.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            out |= {a.name.split(".")[1] for a in node.names if a.name.startswith("bayesnotes.")}
    return out & set(MODULES)


def test_module_graph_is_acyclic():
    "Every import of a sibling module, anywhere in a module (function-local ones too), points down a DAG."
    graph = {m: _imports_of(m) for m in MODULES}
    state = {}
    def visit(m, path):
        if state.get(m) == "done":
            return
        assert state.get(m) != "open", f"import cycle: {' -> '.join(path + [m])}"
        state[m] = "open"
        for n in sorted(graph[m]):
            visit(n, path + [m])
        state[m] = "done"
    for m in MODULES:
        visit(m, [])


def test_foundations_import_no_chapter():
    "utils, plotting, datasets, core and targets import only foundations; no chapter imports a sibling for data."
    found = {"utils", "plotting", "datasets", "core", "targets"}
    for m in found:
        assert _imports_of(m) <= found, f"{m} imports {_imports_of(m) - found}"
    assert _imports_of("utils") == set() and _imports_of("plotting") <= {"utils"}


def test_diagnostics_does_not_import_samplers():
    code = "import sys, bayesnotes.diagnostics; print(sorted(m for m in sys.modules if m.startswith('bayesnotes.')))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "bayesnotes.mcmc" not in loaded and "bayesnotes.vi" not in loaded, loaded


# Public signatures whose `rng` may stay required: the SMC protocol hooks, which the engine calls with its own
# generator (a user's subclass implements them, as in particles' FeynmanKac), and the converters whose subject is
# the rng argument itself.
_RNG_REQUIRED = {"utils.spawn_rng", "utils.int_seed"}
_RNG_HOOKS = ("M0", "M", "sample_initial", "sample_transition", "sample_obs", "sample_optimal")


@pytest.mark.parametrize("modname", MODULES)
def test_rng_is_an_optional_keyword(modname):
    """SPEC 7 as the glossary states it: every public `rng` has a default, `None` (fresh entropy) for library
    functions or a fixed int seed for the book's figures and worked examples; no signature requires it."""
    mod = importlib.import_module(f"bayesnotes.{modname}")
    bad = {}
    for q, f in _public_callables(mod):
        p = inspect.signature(f).parameters.get("rng")
        if p is None or f"{modname}.{q}" in _RNG_REQUIRED or q.split(".")[-1] in _RNG_HOOKS:
            continue
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) or not (p.default is None or type(p.default) is int):
            bad[q] = str(p)
    assert not bad, f"bayesnotes.{modname}: rng without a None/int default: {bad}"


def test_rng_none_draws_fresh_entropy():
    "rng omitted: a fresh generator each call (two calls differ), an int seed repeats, as SPEC 7 prescribes."
    from bayesnotes.core import mvn_sample
    from bayesnotes.montecarlo import box_muller, qmc_points
    from bayesnotes.vi import MeanFieldGaussian
    for f in (lambda **k: mvn_sample([0., 0.], np.eye(2), size=4, **k), lambda **k: box_muller(6, **k),
              lambda **k: qmc_points(8, 2, **k), lambda **k: MeanFieldGaussian(2).sample(3, **k)):
        assert not np.array_equal(f(), f())               # P(equal) = 0 for continuous draws
        assert np.array_equal(f(rng=5), f(rng=5))
