"""Every place daskgp writes, renames or deletes on disk, enumerated (issue 56, item 1): the source is
scanned for such calls (``to_netcdf``, ``to_zarr``, ``to_parquet``, ``to_csv`` to a path, ``np.savez``,
``open`` for writing, ``os.replace`` / ``rename`` / ``remove`` / ``mkdir``, ``shutil.rmtree``, zarr groups
and arrays, the atomic writers) and each function holding one must be registered below with the guard that
keeps its path under the writer rule (:func:`daskgp.core.files.check_destination` /
:func:`~daskgp.core.files.check_outputs`, :func:`daskgp.runs.layout.check_new_run_path`), or the reason it
needs none (a folder daskgp made itself, the data cache, a read-only open). A new writer fails this test
until it is registered — so it cannot skip the rule unseen — and a registered one that no longer writes
fails too (the list stays true)."""

from __future__ import annotations

import ast
import pathlib

import daskgp

RULE = "the writer rule"
WRITERS = {
    # the atomic primitives: their callers check the path first (the entries below)
    "daskgp.core.files:replaced_atomically": "primitive",
    "daskgp.core.files:write_atomically": "primitive",
    # every user-given path
    "daskgp.interface.cli.results:write_table_predictions": f"{RULE}: --predictions, check_fit_outputs",
    "daskgp.interface.cli.results:write_table_results": f"{RULE}: --out, check_fit_outputs",
    "daskgp.interface.cli.results:write_test_results": f"{RULE}: --out, check_fit_outputs",
    "daskgp.interface.cli.gpc:gpc_command": f"{RULE}: --out, check_fit_outputs",
    "daskgp.interface.cli.runs:predict_command": f"{RULE}: --out, check_out_path",
    "daskgp.interface.doctor:doctor_command": f"{RULE}: --json, check_out_path",
    "daskgp.mcmc.diagnostics:save_netcdf": f"{RULE}: check_destination",
    "daskgp.sparse.sgpr:SparseGPRegressor.save": f"{RULE}: check_destination",
    "daskgp.runs.models:write_model": f"{RULE}: check_destination (every estimator's save)",
    # a run: check_new_run_path before its staging folder exists; then only inside the run it holds
    "daskgp.runs.draws:DrawStore.create": f"{RULE}: check_new_run_path (sample, before any work)",
    "daskgp.runs.draws:DrawStore.append": "inside the run it created and holds the lock of",
    "daskgp.runs.draws:DrawStore._swap_in": "inside the run it created and holds the lock of",
    "daskgp.runs.draws:DrawStore._trim": "inside the run it holds the lock of",
    "daskgp.runs.draws:DrawStore.close": "its own staging folder, never committed",
    "daskgp.runs.draws:_salvaged": "repair: inside a run it verified and locked",
    "daskgp.runs.draws:repair": "repair: inside a run it verified and locked",
    "daskgp.runs.draws:remove_dead_staging": "a staging folder of our name, its writer dead, only a run's "
                                             "entries in it (staging_folders)",
    "daskgp.runs.commit:commit": "the checkpoint document inside a run or fit checkpoint it holds",
    "daskgp.runs.lock:acquire": "the writer's lock file inside a run or checkpoint",
    "daskgp.runs.lock:release": "the writer's lock file inside a run or checkpoint",
    "daskgp.runs.lock:clear_for_repair": "the writer's lock file inside a run or checkpoint",
    "daskgp.runs.reader:scan_blocks": "read-only (zarr mode 'r')",
    # a fit checkpoint: its path checked with the fit's outputs (check_fit_outputs, or the estimator's)
    "daskgp.runs.fits:FitStore.writing": f"{RULE}: the checkpoint, check_fit_outputs / check_destination",
    "daskgp.runs.fits:FitStore.log_heldout": "inside the checkpoint folder it holds",
    "daskgp.runs.fits:FitStore.commit": "superseded array files (its own names) in the checkpoint it holds",
    "daskgp.runs.fitarrays:write_array": "an array file inside the fit checkpoint whose FitStore holds it "
                                         "(FitStore.write_array, inside its writing())",
    "daskgp.runs.fits:FitStore.remove": "the checkpoint folder it wrote (written_kind says so first)",
    "daskgp.runs.fits:repair_fit": "repair: a stale lock inside a fit checkpoint",
    # folders daskgp makes itself
    "daskgp.datasets.loaders:_download": "the data cache (DASKGP_DATA or ~/.cache/daskgp), a data set's name",
    "daskgp.interface.page:_new_run_folder": "a new, freshly named folder in the dashboard's runs folder",
    "daskgp.interface.page:RunPage.on_start": "the empty folder it just made, when the start is refused",
    "daskgp.interface.page:RunPage.on_fit_start": "the empty folder it just made, when a start is refused",
    "daskgp.interface.runviews:RunViews.export_summary_csv": "the page's own run folder or temporary folder",
    "daskgp.interface.runviews:RunViews.map_log_params": "read-only (zarr mode 'r')",
    "daskgp.interface.dashboard:LiveRun.close": "its own temporary folder (tempfile.mkdtemp)",
    "daskgp.interface.stored:StoredRun.close": "its own temporary folder (tempfile.mkdtemp)",
    "daskgp.interface.fitjob:LiveFit.__init__": "the fit job's log in the folder the page made for it",
}

_ATTRS = {"to_netcdf", "to_zarr", "to_parquet", "savez", "savez_compressed", "write_bytes", "write_text",
          "mkdir", "makedirs", "rmtree", "open_group", "create_group", "create_array", "copytree", "touch"}
_MODULE_CALLS = {("os", "replace"), ("os", "rename"), ("os", "remove"), ("os", "unlink"), ("os", "rmdir"),
                 ("os", "mkdir"), ("os", "makedirs"), ("shutil", "move"), ("shutil", "rmtree")}
_ATOMIC = {"write_atomically", "replaced_atomically"}


def _write_call(node: ast.Call) -> str | None:
    fn = node.func
    if isinstance(fn, ast.Attribute):
        owner = fn.value.id if isinstance(fn.value, ast.Name) else None
        if (owner, fn.attr) in _MODULE_CALLS:
            return f"{owner}.{fn.attr}"
        if fn.attr in _ATOMIC or (fn.attr in _ATTRS and owner not in ("os", "shutil")):
            return fn.attr
        if fn.attr == "to_csv" and (node.args or any(k.arg == "path_or_buf" for k in node.keywords)):
            return "to_csv"  # to_csv() without a path returns the text
        return None
    if isinstance(fn, ast.Name):
        if fn.id in _ATOMIC:
            return fn.id
        if fn.id == "open":
            mode = node.args[1] if len(node.args) > 1 else next(
                (k.value for k in node.keywords if k.arg == "mode"), None)
            if isinstance(mode, ast.Constant) and any(c in str(mode.value) for c in "wax+"):
                return "open"
    return None


class _Writes(ast.NodeVisitor):
    """Collects ``module:Qualified.name`` → write calls of one module's source."""

    def __init__(self, module: str, found: dict[str, set[str]]):
        self.module, self.found, self.stack = module, found, []

    def visit_FunctionDef(self, node):
        self.stack.append(node.name)
        self.generic_visit(node)
        self.stack.pop()

    visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

    def visit_Call(self, node):
        what = _write_call(node)
        if what:
            self.found.setdefault(f"{self.module}:{'.'.join(self.stack)}", set()).add(what)
        self.generic_visit(node)


def writers() -> dict[str, set[str]]:
    """``module:Qualified.name`` of every function (or class body) in daskgp that writes, with its calls."""
    root = pathlib.Path(daskgp.__file__).parent
    found: dict[str, set[str]] = {}
    for file in sorted(root.rglob("*.py")):
        module = ".".join(("daskgp", *file.relative_to(root).with_suffix("").parts))
        _Writes(module, found).visit(ast.parse(file.read_text(encoding="utf-8")))
    return found


def test_every_writer_is_registered_with_its_guard():
    found = writers()
    new = sorted(set(found) - set(WRITERS))
    gone = sorted(set(WRITERS) - set(found))
    assert not new, f"writers not registered (which guard keeps their path under the rule?): {new}"
    assert not gone, f"registered writers that no longer write: {gone}"


def test_the_scan_sees_each_kind_of_write():
    """The scan's power: each kind of call it must catch is caught in a sample, and reads are not."""
    sample = '''
def f(ds, df, p):
    ds.to_netcdf(p); df.to_csv(p); os.replace(a, b); shutil.rmtree(p); open(p, "wb")
def g(df, p):
    text = df.to_csv(index=False); open(p); open(p, "rb"); "a".replace("a", "b"); items.remove(1)
'''
    calls = {}
    for fn in ast.parse(sample).body:
        calls[fn.name] = {w for n in ast.walk(fn) if isinstance(n, ast.Call) and (w := _write_call(n))}
    assert calls == {"f": {"to_netcdf", "to_csv", "os.replace", "shutil.rmtree", "open"}, "g": set()}
