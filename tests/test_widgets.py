"""The notebooks' widgets pass only keywords that their functions take.

ipywidgets' `interact` silently ignores a keyword that is not a parameter of the function: the slider it
describes never appears, and the parameter gets a default control instead. Nothing fails, neither nbval nor the
website build. This happened once: `seed=(0, 20, 1)` stayed in 03_montecarlo after `fig_proposal_width`'s argument
became `rng`, so the reader got an automatic `rng` slider instead of the intended 0-20 seed slider. Here every
`interact(f, name=...)` call in the chapters is parsed and each keyword is looked up among the parameters of `f` (a
function of the package, a function defined in the same notebook, or a lambda)."""
import ast
import importlib
import inspect
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "nbs").glob("[0-9]*.ipynb"))


def _sources(nb_path):
    "The source of every code cell, as written."
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def _code(nb_path):
    "Code cells without their `#|` directives and shell/magic lines, ready for `ast.parse`."
    for src in _sources(nb_path):
        yield "\n".join(l for l in src.splitlines() if not l.lstrip().startswith(("#|", "%", "!")))


def _params(node):
    a = node.args
    return {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}, a.kwarg is not None


def _interact_calls(nb_path):
    "(function description, its parameters, **kwargs?, keywords passed) for every interact(...) call."
    trees = [ast.parse(src) for src in _code(nb_path)]
    local = {n.name: n for t in trees for n in ast.walk(t) if isinstance(n, ast.FunctionDef)}
    module = importlib.import_module("bayesnotes." + _default_exp(nb_path))
    for t in trees:
        for call in ast.walk(t):
            if not (isinstance(call, ast.Call) and getattr(call.func, "attr", getattr(call.func, "id", None)) == "interact"):
                continue
            f, kws = call.args[0], {k.arg for k in call.keywords if k.arg}
            if isinstance(f, ast.Lambda):
                yield "lambda", *_params(f), kws
            elif isinstance(f, ast.Name) and f.id in local:
                yield f.id, *_params(local[f.id]), kws
            else:
                fn = getattr(module, f.id)
                ps = inspect.signature(fn).parameters
                yield f.id, set(ps), any(p.kind is p.VAR_KEYWORD for p in ps.values()), kws


def _default_exp(nb_path):
    for src in _sources(nb_path):
        for line in src.splitlines():
            if line.startswith("#| default_exp"):
                return line.split()[-1]
    raise AssertionError(f"{nb_path.name} has no default_exp")


def test_there_are_widgets_to_check():
    assert sum(1 for p in NOTEBOOKS for _ in _interact_calls(p)) >= 10


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_widget_keyword_is_a_parameter_of_its_function(nb_path):
    for name, params, var_kw, kws in _interact_calls(nb_path):
        assert var_kw or kws <= params, f"{nb_path.name}: interact({name}, ...) passes {sorted(kws - params)}, not parameters of {name}"
