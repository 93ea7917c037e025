"""Margins of `assert` statements: how far each checked statistic is from its bound.

Used by `tools/seed_sweep.py` (tests/) and `tools/nb_margins.py` (notebooks) to show that every statistical
check holds with room to spare across seeds, not just for the seed it was written with.

An `assert` is rewritten (AST) into a call `__bn_check__(id, kind, *thunks, msg=...)` that evaluates every
operand once, records a *margin* and raises `AssertionError` exactly when the original assert would fail:

* `a < b`, `a <= b` (and `>`, `>=`, chains `a < x < b`): margin = min over elements of `b - a`
  (resp. `a - b`); `np.all(...)`, `all(...)`, `(...).all()` and `&` / `and` of such comparisons take the
  minimum of their parts' margins (the max-statistic of the comparisons they make);
* `np.allclose(a, b, rtol, atol)` / `np.isclose` / `math.isclose`: margin = 1 - max |a - b| / (atol + rtol |b|),
  the unused fraction of the tolerance (1: exact agreement; 0: at the tolerance), so that checks of identities
  up to rounding are measured against their tolerance, not in the units of a tiny `atol`;
* a comparison of a p-value (an operand whose source mentions `pvalue`, `p_value` or `pval`) with its level,
  `p > c`: margin = log10(p) - log10(c) in decades. A p-value is uniform under the null, so on its own scale
  mean / sd is about 1.7 whatever the level; on the log scale it is about (log10(1/c) - 0.43) / 0.43, which is
  the distance to a false alarm that the level promises;
* an assert whose line carries the comment `# invariant` (a property true by construction, e.g. a count >= 1
  or a stopping rule's threshold) is recorded as pass/fail only: it has no sampling law, so no margin;
* anything else: recorded as pass/fail only (margin `None`).

Records carry the occurrence number of the assert within a run (a loop's k-th pass), so that the tables compare
the same check across seeds instead of mixing the passes of a loop.

A margin is in the units of the statistic; across seeds its mean divided by its standard deviation says how
many "spreads" the check stands from its edge. Only top-level statements and loops are rewritten (not the
bodies of functions or classes defined in a notebook cell); in test modules the bodies of test functions are.
"""
import ast
import builtins
import json
import math
import os
import threading
from pathlib import Path

import numpy as np

_CMP = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_CLOSE = {"allclose", "isclose"}
_PVAL = ("pvalue", "p_value", "pval")
_ALL = {"all"}

_state = threading.local()
_records: list = []
_occ: dict = {}                   # (where, id) -> passes so far in this run
context = {"where": ""}          # set by the runner: test node id or notebook cell


# ----------------------------------------------------------------------------------------------- the rewrite

def _lam(node):
    return ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[],
                                         kwarg=None, defaults=[]), body=node)


def _is_all_call(node):
    "np.all(x) / all(x) / numpy.all(x) / x.all()"
    if not isinstance(node, ast.Call):
        return None
    f = node.func
    if isinstance(f, ast.Name) and f.id in _ALL and len(node.args) == 1 and not node.keywords:
        return node.args[0]
    if isinstance(f, ast.Attribute) and f.attr in _ALL:
        if isinstance(f.value, ast.Name) and f.value.id in ("np", "numpy", "anp") and len(node.args) == 1 \
                and not node.keywords:
            return node.args[0]
        if not node.args and not node.keywords:
            return f.value
    return None


def _spec(node):
    """A margin spec: ("cmp", op, left, right) | ("close", a, b, rtol, atol) | ("min", [specs]) | None."""
    inner = _is_all_call(node)
    if inner is not None:
        return _spec(inner)
    if isinstance(node, ast.Compare) and all(type(op) in _CMP for op in node.ops):
        parts, left = [], node.left
        for op, right in zip(node.ops, node.comparators):
            log = any(k in ast.unparse(left) + ast.unparse(right) for k in _PVAL)
            parts.append(("cmp", _CMP[type(op)] + ("log" if log else ""), left, right))
            left = right
        return parts[0] if len(parts) == 1 else ("chain", parts)
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        specs = [_spec(v) or ("bool", v) for v in node.values]
        texts = [ast.unparse(v) for v in node.values]
        return ("min", specs, texts) if any(s[0] != "bool" for s in specs) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitAnd):
        a, b = _spec(node.left), _spec(node.right)
        texts = [ast.unparse(node.left), ast.unparse(node.right)]
        return ("min", [a, b], texts) if a is not None and b is not None else None
    if isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)):
        name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
        if name in _CLOSE and len(node.args) >= 2:
            math_style = isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
                and node.func.value.id == "math"
            kw = {k.arg: k.value for k in node.keywords}
            if "equal_nan" in kw or len(node.args) > 4:
                return None          # NaN-aware comparison: no margin, the assert is evaluated as written
            if math_style:
                rtol = kw.get("rel_tol", ast.Constant(1e-9)); atol = kw.get("abs_tol", ast.Constant(0.0))
            else:
                rtol = node.args[2] if len(node.args) > 2 else kw.get("rtol", ast.Constant(1e-5))
                atol = node.args[3] if len(node.args) > 3 else kw.get("atol", ast.Constant(1e-8))
            return ("close", node.args[0], node.args[1], rtol, atol, math_style)
    return None


def _encode(spec, thunks):
    "Turn a spec into a JSON-able plan whose leaves index into `thunks` (lambdas evaluated once each)."
    kind = spec[0]
    if kind == "bool":
        thunks.append(_lam(spec[1]))
        return ["bool", len(thunks) - 1]
    if kind == "cmp":
        thunks += [_lam(spec[2]), _lam(spec[3])]
        return ["cmp", spec[1], len(thunks) - 2, len(thunks) - 1]
    if kind == "chain":
        # a < x < b: evaluate x once
        parts, idx = spec[1], []
        thunks.append(_lam(parts[0][2])); idx.append(len(thunks) - 1)
        for p in parts:
            thunks.append(_lam(p[3])); idx.append(len(thunks) - 1)
        return ["chain", [p[1] for p in parts], idx]
    if kind == "min":
        return ["min", [_encode(s, thunks) for s in spec[1]], spec[2] if len(spec) > 2 else None]
    if kind == "close":
        thunks += [_lam(spec[1]), _lam(spec[2]), _lam(spec[3]), _lam(spec[4])]
        n = len(thunks)
        return ["close", n - 4, n - 3, n - 2, n - 1, spec[5]]
    raise AssertionError(kind)


class AssertRecorder(ast.NodeTransformer):
    """Rewrite `assert` statements into `__bn_check__` calls. `skip_defs`: leave function/class bodies alone
    (notebook cells define library code); test modules rewrite inside test functions."""

    def __init__(self, label="", skip_defs=True, source=None):
        self.label, self.skip_defs = label, skip_defs
        self.lines = source.splitlines() if isinstance(source, str) else None

    def visit_FunctionDef(self, node):
        return node if self.skip_defs else self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        return node if self.skip_defs else self.generic_visit(node)

    def visit_Lambda(self, node):
        return node

    def visit_Assert(self, node):
        spec = _spec(node.test)
        if self.lines and any("# invariant" in self.lines[i - 1]
                              for i in range(node.lineno, (node.end_lineno or node.lineno) + 1) if i <= len(self.lines)):
            spec = None
        thunks = []
        if spec is None:
            plan = ["bool", 0]
            thunks.append(_lam(node.test))
        else:
            plan = _encode(spec, thunks)
        text = ast.unparse(node.test)
        ident = f"{self.label}:{node.lineno}"
        call = ast.Call(func=ast.Name("__bn_check__", ast.Load()),
                        args=[ast.Constant(ident), ast.Constant(text), ast.Constant(json.dumps(plan)),
                              ast.List(thunks, ast.Load())],
                        keywords=[ast.keyword("msg", _lam(node.msg) if node.msg is not None else ast.Constant(None)),
                                  ast.keyword("test", _lam(node.test))])
        new = ast.Expr(call)
        return ast.copy_location(new, node)


def rewrite(tree, label="", skip_defs=True, source=None):
    "Rewrite the asserts of `tree`; `source` (its text) lets `# invariant` comments mark pass/fail-only checks."
    tree = AssertRecorder(label, skip_defs, source).visit(tree)
    ast.fix_missing_locations(tree)
    return tree


# ----------------------------------------------------------------------------------------------- the check

def _fmin(x):
    x = np.asarray(x, dtype=float)
    return float(np.min(x)) if x.size else math.inf


def _margin(plan, vals):
    kind = plan[0]
    if kind == "bool":
        return bool(vals[plan[1]]), None
    if kind == "cmp":
        a, b = np.asarray(vals[plan[2]]), np.asarray(vals[plan[3]])
        op, log = plan[1].replace("log", ""), plan[1].endswith("log")
        ok = bool(np.all({"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]))
        try:
            if log:             # p-values: decades between the p-value and its level
                with np.errstate(divide="ignore", invalid="ignore"):
                    la, lb = np.log10(a.astype(float)), np.log10(b.astype(float))
                m = _fmin(lb - la) if op in ("<", "<=") else _fmin(la - lb)
            else:
                m = _fmin(b - a) if op in ("<", "<=") else _fmin(a - b)
        except (TypeError, ValueError):
            m = None
        return ok, m
    if kind == "chain":
        ops, idx = plan[1], plan[2]
        res = [_margin(["cmp", op, i, j], vals) for op, i, j in zip(ops, idx[:-1], idx[1:])]
        return all(r[0] for r in res), _min_m([r[1] for r in res])
    if kind == "min":
        res = [_margin(p, vals) for p in plan[1]]
        return all(r[0] for r in res), _min_m([r[1] for r in res])
    if kind == "close":
        a, b = np.asarray(vals[plan[1]], float), np.asarray(vals[plan[2]], float)
        rtol, atol = np.asarray(vals[plan[3]], float), np.asarray(vals[plan[4]], float)
        with np.errstate(invalid="ignore"):                    # 0 * inf: a NaN tolerance, where only equality counts
            if plan[5]:   # math.isclose: |a-b| <= max(rel_tol * max(|a|,|b|), abs_tol)
                tol = np.maximum(rtol * np.maximum(np.abs(a), np.abs(b)), atol)
            else:
                tol = atol + rtol * np.abs(b)
            diff = np.where(a == b, 0.0, np.abs(a - b))          # equal infinities are close, as numpy and math say
        with np.errstate(divide="ignore", invalid="ignore"):
            used = np.where(diff == 0, 0.0, diff / tol)          # fraction of the tolerance used (inf if tol = 0)
        ok = bool(np.all((diff == 0) | (diff <= tol)))           # NaN is never close (numpy's equal_nan=False)
        return ok, 1.0 - float(np.max(used)) if used.size else math.inf
    raise AssertionError(kind)


def _min_m(ms):
    return None if any(m is None for m in ms) else min(ms)


def check(ident, text, plan_json, thunks, msg=None, test=None):
    "Evaluate an assert's operands once, record its margin, and fail exactly as the assert would."
    plan = json.loads(plan_json)
    k_occ = _occ[(context["where"], ident)] = _occ.get((context["where"], ident), -1) + 1
    try:
        vals = [t() for t in thunks]
    except Exception:
        # an operand that only makes sense after a short-circuit (`x is not None and x.y < 1`): plain assert
        plan, vals = ["bool", 0], [test()]
    if plan[0] == "bool":
        ok, m = bool(vals[0]), None
    elif plan[0] == "min" and plan[2]:
        # a conjunction of checks in different units: one record per part (the overall outcome decides)
        parts = [_margin(p, vals) for p in plan[1]]
        ok = all(p[0] for p in parts)
        for k, ((ok_k, m_k), t_k) in enumerate(zip(parts, plan[2])):
            _records.append({"where": context["where"], "id": f"{ident}#{k + 1}", "occ": k_occ, "text": t_k, "ok": ok_k,
                             "margin": m_k if m_k is None or math.isfinite(m_k) else None})
        if not ok:
            detail = msg() if callable(msg) else msg
            raise AssertionError(text + (f": {detail}" if detail is not None else ""))
        return
    else:
        try:
            ok, m = _margin(plan, vals)
        except Exception:       # an unusual operand type: fall back to the truth value of the original test
            ok, m = None, None
    if ok is None:
        raise RuntimeError(f"margins: cannot evaluate {text!r}")
    if m is not None and not math.isfinite(m):
        m = None if math.isnan(m) else m
    _records.append({"where": context["where"], "id": ident, "occ": k_occ, "text": text, "ok": ok,
                     "margin": m if m is None or math.isfinite(m) else None})
    if not ok:
        detail = msg() if callable(msg) else msg
        raise AssertionError(f"{text}" + (f": {detail}" if detail is not None else "") +
                             (f" (margin {m:.4g})" if m is not None else ""))


def flush(path):
    "Append the records so far to the JSON-lines file `path` and forget them."
    if _records:
        with open(path, "a") as f:
            for r in _records:
                f.write(json.dumps(r) + "\n")
        _records.clear()
    _occ.clear()


# ----------------------------------------------------------------------------------------------- pytest hook

def install_pytest(out_dir):
    """Called from tests/conftest.py with `--record-margins DIR`: rewrite the asserts of test modules before
    pytest's own assertion rewriting, and write the records of each test into DIR/<pid>.jsonl."""
    import pytest
    from _pytest.assertion import rewrite as pyrewrite

    import sys
    out = Path(out_dir); out.mkdir(parents=True, exist_ok=True)
    path = out / f"{os.getpid()}.jsonl"
    # keep the rewritten byte code away from tests/__pycache__, where a normal run would read it back
    sys.pycache_prefix = str(out / "pycache")
    builtins.__bn_check__ = check
    original = pyrewrite.rewrite_asserts

    def rewrite_asserts(mod, source, module_path=None, config=None):
        if module_path is not None and Path(str(module_path)).name.startswith("test_"):
            text = source.decode() if isinstance(source, bytes) else source
            rewrite(mod, label=Path(str(module_path)).name, skip_defs=False, source=text)
        return original(mod, source, module_path, config)

    pyrewrite.rewrite_asserts = rewrite_asserts

    class _Plugin:
        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_call(self, item):
            context["where"] = item.nodeid
            yield
            flush(path)

    return _Plugin()
