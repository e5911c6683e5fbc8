"""The house's rules a test can read from the source (issue 57): no import runs up the floors (and the model
families never import each other), no module of the package imports another's private names, and no module
grows past ~400 lines — the modules still above it are listed with the size they may not exceed, each to be
cut along its seams, so that a list entry can only shrink."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "daskgp"
MAX_LINES = 400
# modules above MAX_LINES today, each at most its size when it was listed; cut one and drop its line
OVERSIZE: dict[str, int] = {}  # none since issue 57's cuts (the last six along their seams)


# The floors of docs/architecture.md: a package imports only packages on lower floors; packages on one floor
# (the four families; exact and inducing; compute and datasets) never import each other. The run store sits
# above the data sets it reads a run's training data back into.
FLOORS = {"core": 0, "model": 1, "inference": 1, "compute": 2, "datasets": 2, "runs": 3, "exact": 4,
          "inducing": 4, "advgp": 5, "gpc": 5, "mcmc": 5, "sparse": 5, "interface": 6}


def upward_imports(source: str, module: str) -> list[str]:
    """Where ``source`` (the module ``module``, dotted, of a package of :data:`FLOORS`) imports a module of
    a package on its own floor or above (lazy imports inside functions included)."""
    parts = module.split(".")
    own = parts[1]
    hits = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = parts[:len(parts) - node.level]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            targets = [target]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            continue
        for t in targets:
            tp = t.split(".")
            if tp[0] != "daskgp" or len(tp) < 2 or tp[1] not in FLOORS or tp[1] == own:
                continue
            if FLOORS[tp[1]] >= FLOORS[own]:
                hits.append(f"{module}:{node.lineno}: imports {t} (floor {FLOORS[tp[1]]} from floor "
                            f"{FLOORS[own]})")
    return hits


def private_imports(source: str, module: str, package: str = "daskgp") -> list[str]:
    """Where ``source`` (the text of the module ``module``, dotted) uses a private name (one leading
    underscore) of another module of ``package``: ``from X import _name``, or ``mod._name`` on a module it
    imported (``import daskgp.x as mod``, ``from . import mod``)."""
    tree = ast.parse(source)
    parts = module.split(".")
    modules: set[str] = set()  # local names bound to modules of the package
    hits = []

    def absolute(node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = parts[:len(parts) - node.level]
        return ".".join(base + ([node.module] if node.module else []))

    def private(name: str) -> bool:
        return name.startswith("_") and not name.startswith("__")

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            src = absolute(node)
            if not src.startswith(package):
                continue
            for a in node.names:
                if private(a.name):
                    hits.append(f"{module}:{node.lineno}: from {src} import {a.name}")
                elif (PACKAGE.parent / src.replace(".", "/") / f"{a.name}.py").exists():
                    modules.add(a.asname or a.name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith(package + "."):
                    if any(private(p) for p in a.name.split(".")):
                        hits.append(f"{module}:{node.lineno}: import {a.name}")
                    if a.asname:
                        modules.add(a.asname)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules
                and private(node.attr)):
            hits.append(f"{module}:{node.lineno}: {node.value.id}.{node.attr}")
    return hits


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        yield path, ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)


def test_every_package_is_on_a_floor():
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages == set(FLOORS), f"put the new package on a floor: {packages ^ set(FLOORS)}"


def test_no_import_runs_up_the_floors():
    hits = [h for path, mod in _modules() if mod.count(".") >= 1 and mod.split(".")[1] in FLOORS
            for h in upward_imports(path.read_text(), mod)]
    assert not hits, "\n".join(hits)


@pytest.mark.parametrize("source, module, n_hits", [
    ("from ..model.kernels import RBF\n", "daskgp.core.priors", 1),  # the alias core/kernels.py would be
    ("from ..sparse.fit import fit_global\n", "daskgp.advgp.start", 1),  # a family importing a sibling
    ("def f():\n    from ...interface.cli import main\n", "daskgp.mcmc.samplers.sghmc", 1),  # lazy, upward
    ("import daskgp.mcmc.chains\n", "daskgp.exact.posterior", 1),
    ("from ..core.validation import check_X\nfrom .kernels import RBF\n", "daskgp.model.params", 0),
    ("from ...compute.operator import KernelOperator\n", "daskgp.mcmc.samplers.hmc", 0),
])
def test_the_floor_scan_finds_what_it_forbids(source, module, n_hits):
    """Power: an upward, a sideways and a lazy upward import are each found; downward ones are not."""
    assert len(upward_imports(source, module)) == n_hits


def test_no_module_imports_another_modules_private_names():
    hits = [h for path, mod in _modules() for h in private_imports(path.read_text(), mod)]
    assert not hits, "\n".join(hits)


@pytest.mark.parametrize("source, n_hits", [
    ("from .segments import _operator\n", 1),  # the form warmup.py used before issue 57
    ("from daskgp.runs.layout import _scan, read_run\n", 1),
    ("from . import segments\nop = segments._operator(1)\n", 1),
    ("import daskgp.mcmc.segments as seg\nseg._WarmupTicker\n", 1),
    ("from .segments import run_segment\nclass A:\n    def _own(self):\n        return self._x\n", 0),
    ("from numpy import _globals\n", 0),  # another package's business
])
def test_the_scan_finds_what_it_forbids(source, n_hits):
    """Power: each forbidden form is found, and a module's own private names are not."""
    assert len(private_imports(source, "daskgp.mcmc.warmup")) == n_hits


def test_no_module_grows_past_its_size():
    sizes = {str(path.relative_to(PACKAGE)): len(path.read_text().splitlines()) for path, _ in _modules()}
    over = {m: n for m, n in sizes.items() if n > OVERSIZE.get(m, MAX_LINES)}
    assert not over, f"over {MAX_LINES} lines (or over their listed size): {over}; cut them along a seam"
    shrunk = {m: sizes.get(m) for m in OVERSIZE if sizes.get(m, 0) <= MAX_LINES}
    assert not shrunk, f"cut below {MAX_LINES} lines (or gone): drop them from OVERSIZE: {shrunk}"
