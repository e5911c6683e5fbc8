"""Issue 56's hostile re-run: the command line (and the saved-model API) against bad files and bad paths, each
outcome classified by rule, not by eye.

    python benchmarks/hostile_files.py [--only NAME,...] [--keep DIR]

(``--only``: the cases whose names contain one of the substrings, their results replacing the earlier ones
of the same name in the JSON.)

Every case builds its files in a folder of its own (tables, runs, models, checkpoints, a user's files), runs
one real ``python -m daskgp …`` process (or a few lines of the library's API), and is classified from what
came back and what the folder holds afterwards:

* ``loss``: a file that was there before (an input, a user's file) changed or disappeared;
* ``traceback``: a Python traceback (or distributed's "Compute Failed") in the output;
* for a case that must be refused — ``one-line`` when the exit status is non-zero, stderr's last line is
  ``daskgp: error: …`` (one line) and names what it must (the file, its row and column, …), and nothing new
  was written; ``misleading`` when refused but the line misses what it must name (or something was written
  anyway); ``silent`` when it exits 0 (accepted what it should refuse);
* for a case that should be accepted — ``accepted`` when it exits 0 and its check holds, ``misleading``
  when it was refused (the line is kept), ``silent`` when it exits 0 with a wrong result.

Writes benchmarks/results/hostile_files.json: every case's class, exit status, last stderr line and wall
seconds, and the counts. The cases are the families of issue 56's list (the writer rule; ownership; tables
validated per file; digests of models and fit checkpoints; the tool's advice; staging folders), each built
here from the issue's description (the issue's own 176 scripts were not given). The dashboard's cases (a
forged ``Origin`` off localhost; a run opened in its warmup) need a served page and a browser-less HTTP
client: they are the tests ``tests/interface/test_dashboard_auth.py`` and ``tests/runs/test_catalog.py``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
OUT_JSON = HERE / "results" / "hostile_files.json"
T = "energy_output_mw"
SMALL = ["--inducing", "5", "--max-iter", "2", "--workers", "1"]


@dataclass
class Case:
    """One hostile case: ``setup(folder)`` builds its files and returns the argv of ``python -m daskgp`` (or
    a Python snippet, ``api=True``, run with the folder as its working directory); ``refuse``: whether it
    must be refused; ``names``: what a refusal's line must contain ({d} is the folder); ``check(folder,
    stdout)``: for an accepted case, whether the result is right."""

    name: str
    family: str
    setup: object
    refuse: bool = True
    names: tuple = ()
    check: object = None
    api: bool = False
    allowed_new: tuple = field(default_factory=tuple)  # new entries a refusal may leave (none by default)
    changes: tuple = field(default_factory=tuple)  # what the command is asked to change (path prefixes)


# ------------------------------------------------------------------------------------------------ files
def _plant(n=600) -> pd.DataFrame:
    return pd.read_csv(Path(os.environ["DASKGP_DATA"]) / "power_plant.csv").iloc[:n]


def _parquet_folder(d: Path, name="table", parts=3, n=600) -> Path:
    folder = d / name
    folder.mkdir()
    df, cuts = _plant(n), np.linspace(0, n, parts + 1).astype(int)
    for i in range(parts):
        df.iloc[cuts[i]:cuts[i + 1]].to_parquet(folder / f"p{i}.parquet", index=False)
    return folder


def _csv_parts(d: Path, texts: list[str | bytes], name="csv") -> str:
    folder = d / name
    folder.mkdir()
    for i, t in enumerate(texts):
        (folder / f"p{i}.csv").write_bytes(t if isinstance(t, bytes) else t.encode("utf-8"))
    return str(folder / "p*.csv")


def _good_csv(rows=200, start=0) -> str:
    return _plant(start + rows).iloc[start:].to_csv(index=False)


def _sgpr(d: Path, data: str, *extra) -> list[str]:
    return ["sgpr", "--data", data, "--target", T, *SMALL, *extra]


_RUN_CACHE: dict[str, Path] = {}


def _cached(kind: str, d: Path) -> Path:
    """A run (MH on concrete, 20 iterations) or an SGPR results file, made once and copied into ``d``."""
    if kind not in _RUN_CACHE:
        base = Path(tempfile.mkdtemp(prefix="daskgp-hostile-base-"))
        if kind == "run":
            argv = ["sample", "--data", "concrete", "--method", "mh", "--chains", "2", "--iterations", "20",
                    "--workers", "1", "--out", str(base / "run.zarr")]
            target = base / "run.zarr"
        else:
            argv = ["sgpr", "--data", "concrete", *SMALL, "--out", str(base / "model.nc")]
            target = base / "model.nc"
        r = subprocess.run([sys.executable, "-m", "daskgp", *argv], capture_output=True, text=True,
                           timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"could not make the {kind} the cases need: {r.stderr.strip()[-300:]}")
        _RUN_CACHE[kind] = target
    src = _RUN_CACHE[kind]
    dst = d / src.name
    (shutil.copytree if src.is_dir() else shutil.copy2)(src, dst)
    return dst


# ------------------------------------------------------------------------------------------------ cases
def _cases() -> list[Case]:
    cases: list[Case] = []

    def add(*a, **k):
        cases.append(Case(*a, **k))

    # the writer rule (issue 56, build item 1)
    add("predictions inside the input table", "writer rule",
        lambda d: _sgpr(d, str(_parquet_folder(d)), "--predictions", str(d / "table" / "pred")),
        names=("table",))
    add("predictions onto --out", "writer rule",
        lambda d: _sgpr(d, str(_parquet_folder(d)), "--out", str(d / "m.nc"), "--predictions",
                        str(d / "m.nc")),
        names=("m.nc",))
    add("predictions inside --out's checkpoint", "writer rule",
        lambda d: _sgpr(d, str(_parquet_folder(d)), "--out", str(d / "m.nc"), "--predictions",
                        str(d / "m.nc.checkpoint" / "pred")), names=("m.nc.checkpoint",))
    add("predictions inside a resumed fit's own checkpoint", "writer rule",
        lambda d: _interrupted_sgpr(d, table=True) + ["--resume", "--predictions",
                                                      str(d / "m.nc.checkpoint" / "pred")],
        names=("inside",))
    add("predictions inside a run", "writer rule",
        lambda d: (_cached("run", d), _sgpr(d, str(_parquet_folder(d)), "--predictions",
                                            str(d / "run.zarr" / "pred")))[1], names=("run.zarr",))
    add("advgp predictions inside the input table", "writer rule",
        lambda d: ["advgp", "--data", str(_parquet_folder(d)), "--target", T, "--inducing", "5", "--max-iter",
                   "4", "--workers", "1", "--predictions", str(d / "table" / "p")], names=("table",))
    add("a run inside a run", "writer rule",
        lambda d: (_cached("run", d), ["sample", "--data", "concrete", "--method", "mh", "--iterations", "10",
                                       "--workers", "1", "--out", str(d / "run.zarr" / "sub.zarr")])[1],
        names=("run.zarr",))
    add("--out through a symbolic link", "writer rule",
        lambda d: (os.symlink(d / "elsewhere.nc", d / "link.nc"),
                   _sgpr(d, "concrete", "--out", str(d / "link.nc")))[1], names=("link.nc",))
    add("--out inside a user's zarr store", "writer rule",
        lambda d: (_user_zarr(d), _sgpr(d, "concrete", "--out", str(d / "mine.zarr" / "m.nc")))[1],
        names=("mine.zarr",))
    add("--out onto the input CSV", "writer rule",
        lambda d: ((d / "in.csv").write_text(_good_csv()),
                   ["sgpr", "--csv", str(d / "in.csv"), "--target", T, *SMALL, "--out", str(d / "in.csv"),
                    "--overwrite"])[1], names=("in.csv",))

    # ownership (build item 2)
    add("predict --overwrite onto a user's CSV with the same header", "ownership",
        lambda d: (_cached("run", d), _user_csv(d, "pred.csv"), (d / "x.csv").write_text(_concrete_x(5)),
                   ["predict", str(d / "run.zarr"), "--x", str(d / "x.csv"), "--out", str(d / "pred.csv"),
                    "--overwrite"])[3], names=("pred.csv",))
    add("sgpr --overwrite onto a user's netCDF", "ownership",
        lambda d: (_user_netcdf(d / "mine.nc"), _sgpr(d, "concrete", "--out", str(d / "mine.nc"),
                                                      "--overwrite"))[1], names=("mine.nc",))
    add("save(overwrite=True) onto a model holding a user's sub-group", "ownership",
        lambda d: _API_SAVE_OVER_SUBGROUP, api=True, names=("model.zarr",))

    # tables, per file (build item 3)
    head = _good_csv(5).splitlines()[0]
    rows = _good_csv(40).splitlines()[1:]
    def with_value(text):  # row 17's relative_humidity replaced
        return rows[:17] + [",".join([text if j == 3 else v for j, v in enumerate(rows[17].split(","))])] + \
            rows[18:]

    add("text in row 17 of one CSV file", "tables",
        lambda d: _sgpr(d, _csv_parts(d, [_good_csv(), "\n".join([head] + with_value("dry")) + "\n"])),
        names=("p1.csv", "row 17", "relative_humidity", "dry"))
    add("'n/a' (pandas reads it as missing) in row 17 of one CSV file", "tables",
        lambda d: _sgpr(d, _csv_parts(d, [_good_csv(), "\n".join([head] + with_value("n/a")) + "\n"])),
        names=("p1.csv", "row 17", "relative_humidity"))
    add("a zero-byte CSV in a glob", "tables", lambda d: _sgpr(d, _csv_parts(d, [_good_csv(), ""])),
        names=("p1.csv", "empty"))
    add("a CSV line with an extra field", "tables",
        lambda d: _sgpr(d, _csv_parts(d, [_good_csv(), "\n".join([head] + rows[:5] + [rows[5] + ",1.5"] +
                                                              rows[6:]) + "\n"])), names=("p1.csv", "line 7"))
    add("a CSV file that is not UTF-8", "tables",
        lambda d: _sgpr(d, _csv_parts(d, [_good_csv(),
                                          (head + "\n").encode() + "é,1,2,3,4\n".encode("latin-1")])),
        names=("p1.csv", "UTF-8"))
    add("a CSV header repeating a name", "tables",
        lambda d: _sgpr(d, _csv_parts(d, [_good_csv().replace("exhaust_vacuum", "temperature", 1)])),
        names=("p0.csv", "temperature"))
    add("a CSV file with its header alone", "tables",
        lambda d: _sgpr(d, _csv_parts(d, [_good_csv(300), head + "\n"]), "--out", str(d / "m.nc")),
        refuse=False, check=lambda d, out: (d / "m.nc").exists())
    add("a zero-byte .parquet file", "tables",
        lambda d: (_parquet_folder(d), (d / "table" / "p9.parquet").write_bytes(b""),
                   _sgpr(d, str(d / "table")))[2], names=("p9.parquet",))
    add("a .parquet file that is not Parquet", "tables",
        lambda d: (_parquet_folder(d), (d / "table" / "p9.parquet").write_bytes(b"PAR1 not really"),
                   _sgpr(d, str(d / "table")))[2], names=("p9.parquet",))
    add("Parquet with a repeated column name", "tables", lambda d: _sgpr(d, _dup_parquet(d)),
        names=("dup.parquet", "temperature"))
    add("Parquet files of different columns", "tables",
        lambda d: (_parquet_folder(d), _plant(50).rename(columns={"temperature": "temp"}).to_parquet(
            d / "table" / "p9.parquet", index=False), _sgpr(d, str(d / "table")))[2], names=("p9.parquet",))
    add("a text column in Parquet", "tables",
        lambda d: (_plant(200).assign(site="north").to_parquet(d / "t.parquet", index=False),
                   _sgpr(d, str(d / "t.parquet")))[1], names=("site",))
    add("a NaN in one Parquet file", "tables",
        lambda d: (_parquet_folder(d), _nan_into(d / "table" / "p1.parquet", 11, "ambient_pressure"),
                   _sgpr(d, str(d / "table")))[2], names=("p1.parquet", "row 11", "column 2"))
    for k, what in ((3, "shorter"), (6, "longer")):
        add(f"a zarr 'columns' attribute {what} than the array", "tables",
            lambda d, k=k: _sgpr(d, _zarr_table(d, k)), names=("t.zarr", "columns"))

    # digests (build item 4)
    add("an SGPR model without its digests", "digests", lambda d: _API_LOAD_ALTERED.format(what="nodigests"),
        api=True, names=("model.nc",))
    add("an SGPR model with y_scale x1000", "digests", lambda d: _API_LOAD_ALTERED.format(what="yscale"),
        api=True, names=("model.nc",))
    add("a fit checkpoint whose step count was raised", "digests",
        lambda d: _altered_checkpoint(d, "step", 10_000), names=("checkpoint", "digest"))
    add("a fit checkpoint whose key was rewritten", "digests",
        lambda d: _altered_checkpoint(d, "key", "x" * 16), names=("checkpoint", "digest"))

    # the tool's advice (build item 5) and staging folders (item 6)
    add("the printed 'continue with' line", "advice", _advice_case, refuse=False,
        check=lambda d, out: int((d / "advice.txt").read_text().split()[0]) > 95, changes=("r.zarr/",))
    add("a dead writer's staging folder", "staging", _dead_staging, refuse=False,
        check=lambda d, out: not list(d.glob("run.zarr.partial-*")) and (d / "run.zarr").is_dir(),
        changes=("run.zarr.partial-",))
    return cases


def _user_zarr(d: Path) -> None:
    import zarr

    g = zarr.open_group(str(d / "mine.zarr"), mode="w")
    g.create_array("a", shape=(3,), dtype="f8")[:] = [1, 2, 3]


def _user_csv(d: Path, name: str) -> None:
    (d / name).write_text("cement,mean,sd,lower,upper\n1,2,3,4,5\n")


def _user_netcdf(path: Path) -> None:
    import xarray as xr

    xr.Dataset({"mine": ("x", np.arange(4.0))}).to_netcdf(path)


def _concrete_x(n: int) -> str:
    df = pd.read_csv(Path(os.environ["DASKGP_DATA"]) / "concrete.csv")
    return df.iloc[:n, :-1].to_csv(index=False)


def _dup_parquet(d: Path) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    v = _plant(100).to_numpy()
    pq.write_table(pa.table([pa.array(v[:, j]) for j in (0, 1, 0, 4)],
                            names=["temperature", "exhaust_vacuum", "temperature", T]), d / "dup.parquet")
    return str(d / "dup.parquet")


def _nan_into(path: Path, row: int, col: str) -> None:
    df = pd.read_parquet(path)
    df.loc[df.index[row], col] = np.nan
    df.to_parquet(path, index=False)


def _zarr_table(d: Path, k: int) -> str:
    import zarr

    v = _plant(300).to_numpy(np.float64)
    a = zarr.create_array(str(d / "t.zarr"), shape=v.shape, dtype="f8")
    a[:] = v
    a.attrs["columns"] = (list(_plant(1).columns) + ["extra"])[:k]
    return str(d / "t.zarr")


_API_SAVE_OVER_SUBGROUP = """
import zarr, daskgp
ds = daskgp.load("concrete")
m = daskgp.SparseGPRegressor(n_inducing=5, max_iter=2).fit(ds.X_std[:300], ds.y_std[:300])
m.save("model.zarr")
mine = zarr.open_group("model.zarr", mode="a").create_group("mine")
mine.create_array("a", shape=(2,), dtype="f8")[:] = [1, 2]
open("ready", "w").close()  # from here on, model.zarr/mine is the user's data
m.save("model.zarr", overwrite=True)
"""

_API_LOAD_ALTERED = """
import os, shutil, xarray as xr, daskgp
ds = daskgp.load("concrete")
m = daskgp.SparseGPRegressor(n_inducing=5, max_iter=2).fit(ds.X_std[:300], ds.y_std[:300])
m.save("orig.nc")
d = xr.load_dataset("orig.nc")
if "{what}" == "nodigests":
    d.attrs = {{k: v for k, v in d.attrs.items() if "digest" not in k}}
else:
    d.attrs["y_scale"] = float(d.attrs["y_scale"]) * 1000
d.to_netcdf("model.nc")
os.remove("orig.nc")
daskgp.SparseGPRegressor.load("model.nc").predict(ds.X_std[:5])
"""


def _altered_checkpoint(d: Path, field_: str, value) -> list[str]:
    """An interrupted SGPR fit's checkpoint, one field altered; the argv resumes it."""
    argv = _interrupted_sgpr(d)
    for name in ("daskgp-checkpoint.json", "daskgp-checkpoint.prev.json"):
        f = d / "m.nc.checkpoint" / name
        if f.exists():
            doc = json.loads(f.read_text())
            doc[field_] = value
            f.write_text(json.dumps(doc))
    return argv + ["--resume"]


def _interrupted_sgpr(d: Path, table: bool = False) -> list[str]:
    """A real interrupted SGPR fit (killed by SIGKILL after its second commit) with its checkpoint at
    ``d/m.nc.checkpoint``, of house_8L (or, with ``table``, of a Parquet file of it: read on the workers);
    returns its argv (without --resume)."""
    data = "house_8L"
    if table:
        data = str(d / "house.parquet")
        pd.read_csv(Path(os.environ["DASKGP_DATA"]) / "house_8L.csv").to_parquet(data, index=False)
    # 100 inducing points on 22,784 rows: slow enough a step that the fit is caught mid-way, not finished
    argv = ["sgpr", "--data", data, "--inducing", "100", "--max-iter", "500", "--workers", "1", "--out",
            str(d / "m.nc")]
    p = subprocess.Popen([sys.executable, "-m", "daskgp", *argv], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    ck = d / "m.nc.checkpoint" / "daskgp-checkpoint.json"
    deadline = time.time() + 300
    while time.time() < deadline:
        try:
            if json.loads(ck.read_text())["step"] >= 2:
                break
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.05)
    os.killpg(p.pid, 9)
    p.wait()
    if not ck.exists():
        raise RuntimeError("the SGPR fit did not commit two steps in 300 s (or finished first)")
    return argv


def _advice_case(d: Path) -> list[str]:
    """A capped target run that stops unconverged, then the line it printed, run literally (as a shell
    would); the check reads the run's draws after."""
    argv = ["sample", "--data", "concrete", "--method", "mh", "--chains", "2", "--iterations", "95",
            "--checkpoint-every", "30", "--target-ess", "100000", "--workers", "1", "--out",
            str(d / "r.zarr")]
    r = subprocess.run([sys.executable, "-m", "daskgp", *argv], capture_output=True, text=True, timeout=600)
    line = next((ln for ln in (r.stdout + r.stderr).splitlines() if "continue with" in ln), "")
    cmd = line.split("continue with", 1)[1].strip(" :'\"") if line else "false"
    return ["__shell__", cmd.replace("daskgp ", f"{sys.executable} -m daskgp ", 1) +
            f" && {sys.executable} -c \"import json;"
            f"print(json.load(open('{d}/r.zarr/daskgp-checkpoint.json'))['n_draws'])\" > {d}/advice.txt"
            f" && echo n_draws >> {d}/advice.txt"]


def _dead_staging(d: Path) -> list[str]:
    code = ("import os, signal, sys\nfrom daskgp.runs.draws import DrawStore\n"
            "DrawStore.create(sys.argv[1], attrs={'who': 'killed'}, chunk=10)\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n")
    subprocess.run([sys.executable, "-c", code, str(d / "run.zarr")], timeout=120)
    for f in d.glob("run.zarr.partial-*"):  # older than a writer takes to lock it (the rule's 10 minutes)
        os.utime(f, (time.time() - 3600, time.time() - 3600))
    return ["sample", "--data", "concrete", "--method", "mh", "--chains", "2", "--iterations", "10",
            "--workers", "1", "--out", str(d / "run.zarr")]


# ------------------------------------------------------------------------------------------------ running
def _digests(d: Path) -> dict[str, str]:
    return {str(p.relative_to(d)): hashlib.blake2b(p.read_bytes(), digest_size=16).hexdigest()
            for p in sorted(d.rglob("*")) if p.is_file() and not p.is_symlink()}


def run_case(case: Case, d: Path) -> dict:
    spec = case.setup(d)
    before = _digests(d)
    t0 = time.time()
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    if case.api:  # a script as a user writes one: a local cluster needs the __main__ guard
        body = "\n".join("    " + line for line in spec.strip().splitlines())
        (d / "case.py").write_text(f'if __name__ == "__main__":\n{body}\n')
        before = _digests(d)
        cmd = [sys.executable, str(d / "case.py")]
    elif spec[0] == "__shell__":
        cmd = ["bash", "-c", spec[1]]
    else:
        cmd = [sys.executable, "-m", "daskgp", *spec]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=d, env=env)
    wall = time.time() - t0
    after = _digests(d)
    lost = sorted(k for k, v in before.items() if after.get(k) != v and not k.startswith(case.changes))
    if (d / "ready").exists() and not (d / "model.zarr" / "mine").is_dir():  # the user's sub-group
        lost.append("model.zarr/mine")
    new = [] if case.api else sorted(set(after) - set(before))  # an API case makes its own files
    err = r.stderr.strip().splitlines()
    last = err[-1] if err else ""
    tb = "Traceback" in r.stderr or "Compute Failed" in r.stderr
    if case.api:  # a library call: its exception's line is the error line
        tb = False
        refused_line = last if r.returncode != 0 else ""
    else:
        refused_line = last if last.startswith("daskgp: error:") else ""
    named = all(n.format(d=d).lower() in refused_line.lower() for n in case.names)
    if lost:
        verdict = "loss"
    elif tb:
        verdict = "traceback"
    elif case.refuse:
        if r.returncode == 0:
            verdict = "silent"
        elif refused_line and named and not [n for n in new if n not in case.allowed_new]:
            verdict = "one-line"
        else:
            verdict = "misleading"
    else:
        ok = r.returncode == 0 and bool(case.check(d, r.stdout))
        verdict = "accepted" if ok else ("misleading" if r.returncode != 0 else "silent")
    return {"name": case.name, "family": case.family, "verdict": verdict, "returncode": r.returncode,
            "last_line": last[:400].replace(str(d), "<case>"), "new_files": new[:10], "lost": lost[:10],
            "wall_seconds": round(wall, 1)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="comma-separated case names (substrings)")
    ap.add_argument("--keep", default=None, help="build the cases' folders here and keep them")
    args = ap.parse_args(argv)
    os.environ.setdefault("DASKGP_DATA", str(HERE.parents[0].parent / "shared" / "data"))
    sys.path.insert(0, str(HERE))
    from _common import write_results

    wanted = [w.strip() for w in args.only.split(",") if w.strip()]
    cases = [c for c in _cases() if not wanted or any(w in c.name for w in wanted)]
    base = Path(args.keep or tempfile.mkdtemp(prefix="daskgp-hostile-"))
    base.mkdir(parents=True, exist_ok=True)
    results, t0 = [], time.time()
    try:
        for i, case in enumerate(cases):
            d = base / f"case{i:02d}"
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir()
            try:
                res = run_case(case, d)
            except Exception as e:  # the harness's own failure: recorded, not counted as the tool's
                res = {"name": case.name, "family": case.family, "verdict": "harness error",
                       "last_line": f"{type(e).__name__}: {e}"[:400]}
            results.append(res)
            print(f"{res['verdict']:>12}  {case.family:<12} {case.name}: {res['last_line'][:150]}",
                  flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
        for p in _RUN_CACHE.values():
            shutil.rmtree(p.parent, ignore_errors=True)
    wall = time.time() - t0
    if wanted and OUT_JSON.exists():  # cases re-run: they replace their earlier results, by name
        earlier = json.loads(OUT_JSON.read_text())
        again = {r["name"] for r in results}
        results = [r for r in earlier["cases"] if r["name"] not in again] + results
        order = [c.name for c in _cases()]
        results.sort(key=lambda r: order.index(r["name"]) if r["name"] in order else len(order))
        wall += earlier.get("wall_seconds", 0.0)
    counts = {k: sum(r["verdict"] == k for r in results)
              for k in ("one-line", "accepted", "misleading", "traceback", "silent", "loss", "harness error")}
    print(json.dumps(counts))
    write_results(OUT_JSON, {"benchmark": "hostile_files", "issue": 56, "counts": counts, "cases": results,
                             "wall_seconds": wall,
                             "what": "issue 56's families of hostile cases, re-run after the fix; classified "
                                     "by rule (module docstring)"})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
