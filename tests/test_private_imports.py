"""Shared pieces live once, under a public name (issue 32): no module of the package imports another module's
underscore name, in any form (`from .x import _y`, `from bayesnotes.x import _y`, multi-line and function-local
imports, or `x._y` on an imported sibling module). A helper two modules need is public in the module it belongs to
(often a lower one: `utils`, `targets`, or the chapter that introduces it)."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "bayesnotes"
MODULES = {p.stem for p in PKG.glob("*.py")}

# Temporary exceptions, (importing module, imported module, name), for a rename in progress; empty when none is.
ALLOWED = set()


def _private(name):
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_imports(source, module, package="bayesnotes", modules=MODULES):
    """(line, imported module, name) for every underscore name of another sibling module that `source` (the text of
    `module`) imports or reads as an attribute of an imported sibling module. Names imported from other packages
    (`from autograd import grad as _grad`) are not the package's and do not count."""
    tree = ast.parse(source)
    found, aliases = [], {}     # aliases: local name -> sibling module it is bound to

    def sibling(node):
        "The sibling module a `from ... import` names, '' for the package itself, None for another package."
        mod = node.module or ""
        if node.level == 1:
            return mod.split(".")[0]
        if node.level == 0 and (mod == package or mod.startswith(package + ".")):
            return mod.split(".")[1] if "." in mod else ""
        return None

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            target = sibling(node)
            if target is None:
                continue
            for a in node.names:
                if target == "":                               # from . import x / from bayesnotes import x
                    if a.name in modules:
                        aliases[a.asname or a.name] = a.name
                    elif _private(a.name):
                        found.append((node.lineno, package, a.name))
                elif target != module and _private(a.name):
                    found.append((node.lineno, target, a.name))
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == package and len(parts) > 1 and parts[1] in modules:
                    if a.asname:                               # import bayesnotes.x as x
                        aliases[a.asname] = parts[1]
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _private(node.attr)):
            continue
        v = node.value
        if isinstance(v, ast.Name) and v.id in aliases and aliases[v.id] != module:
            found.append((node.lineno, aliases[v.id], node.attr))
        elif (isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name) and v.value.id == package
              and v.attr in modules and v.attr != module):         # bayesnotes.x._y after `import bayesnotes.x`
            found.append((node.lineno, v.attr, node.attr))
    return sorted(found)


def test_no_module_imports_another_modules_private_name():
    bad, used = [], set()
    for path in sorted(PKG.glob("*.py")):
        if path.stem == "_modidx":
            continue
        for line, target, name in private_imports(path.read_text(), path.stem):
            if (path.stem, target, name) in ALLOWED:
                used.add((path.stem, target, name))
            else:
                bad.append(f"bayesnotes/{path.name}:{line} uses {target}.{name}")
    assert not bad, ("make these names public in the module they belong to (with docments), or move them to "
                     "utils/targets if several chapters need them:\n" + "\n".join(bad))
    assert used == ALLOWED, f"allow-list entries no longer needed (remove them): {sorted(ALLOWED - used)}"


PLANTED = '''
from __future__ import annotations
import numpy as np
from autograd import grad as _ad_grad                  # another package: fine
from .utils import as_rng, check_count                # public: fine
from .smc import (bootstrap_filter,
                  _gauss_factor)                      # 6: multi-line (the import's first line)
from bayesnotes.vi import _sgd_loop                   # 8: absolute
from . import mcmc
import bayesnotes.ep as E
from .ais import _own_helper                          # 11: from the module itself (ais): fine
def f(x):
    from .bnn import _unpack                          # 13: function-local
    g = mcmc._batch_fns(x)                            # 14: attribute of an imported sibling
    return E._EPPlan, E.__name__, np.__version__      # 15: E._EPPlan; dunders and other packages are fine
'''


def test_scanner_catches_a_planted_example():
    got = private_imports(PLANTED, "ais")
    assert got == [(6, "smc", "_gauss_factor"), (8, "vi", "_sgd_loop"), (13, "bnn", "_unpack"),
                   (14, "mcmc", "_batch_fns"), (15, "ep", "_EPPlan")], got
    assert private_imports("import bayesnotes.smc\nbayesnotes.smc._psd_factor", "filters") == [(2, "smc", "_psd_factor")]
    assert private_imports("from .vi import elbo\nimport numpy as np\nnp._core", "vifamilies") == []

