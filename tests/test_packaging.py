"""pyproject.toml and environment.yml list the same dependencies with the same lower bounds, each once; the
licence is an SPDX expression with its file."""

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
# what environment.yml stands for; [gpu] is a separate stack
EXTRAS = ("app", "data", "notebook", "docs", "dev")


def _split(req: str) -> tuple[str, str]:
    m = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)(\[[^\]]*\])?\s*(.*?)\s*", req)
    return m.group(1).lower().replace("_", "-"), m.group(3)


def _pyproject() -> tuple[dict, list]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    groups = [project["dependencies"]] + [project["optional-dependencies"][k] for k in EXTRAS]
    names, listed = {}, []
    for group in groups:
        for req in group:
            name, spec = _split(req)
            if name == "daskgp":  # an extra naming other extras of this project
                continue
            listed.append(name)
            names[name] = spec
    return names, listed


def _environment() -> dict:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    entries = [d for d in env["dependencies"] if isinstance(d, str)]
    entries += [p for d in env["dependencies"] if isinstance(d, dict) for p in d["pip"]]
    out = {}
    for entry in entries:
        if entry.startswith("-e") or entry in ("pip",):
            continue
        name, spec = _split(entry)
        assert name not in out, f"environment.yml lists {name} twice"
        out[name] = spec
    assert out.pop("python") == ">=3.12"
    return out


def test_environment_yml_matches_pyproject():
    py, _ = _pyproject()
    env = _environment()
    assert set(env) == set(py), {"only in environment.yml": set(env) - set(py),
                                 "only in pyproject.toml": set(py) - set(env)}
    assert env == py


def test_each_dependency_is_listed_once():
    _, listed = _pyproject()
    assert len(listed) == len(set(listed)), sorted(n for n in listed if listed.count(n) > 1)


def test_licence_is_spdx_with_its_file():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "BSD-3-Clause"
    assert project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().startswith("BSD 3-Clause License")


def test_environment_gpu_yml_is_the_runtime_plus_the_gpu_extra():
    """environment-gpu.yml: pyproject's runtime dependencies with their bounds, cupy and dask-cuda (conda
    names of the [gpu] extra's cupy-cuda12x and dask-cuda[cu12]), the CUDA pin, nothing else."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = dict(_split(r) for r in project["dependencies"])
    gpu = dict(_split(r) for r in project["optional-dependencies"]["gpu"])
    env = yaml.safe_load((ROOT / "environment-gpu.yml").read_text())
    listed = dict(_split(d) for d in env["dependencies"] if isinstance(d, str) and d != "pip")
    assert listed.pop("python") == ">=3.12" and listed.pop("cuda-version") == ">=12,<13"
    assert listed.pop("cupy") == gpu["cupy-cuda12x"] and listed.pop("dask-cuda") == gpu["dask-cuda"]
    assert listed == runtime


def test_every_arviz_call_the_docs_and_the_cli_suggest_exists():
    """`az.plot_ppc` (ArviZ 0.x) was suggested by the README and the CLI and does not exist in the pinned
    ArviZ 1.x (issue 29): every ``az.NAME`` in the README, the docs and the package must be an attribute."""
    import arviz as az

    root = ROOT
    texts = [root / "README.md", *root.joinpath("daskgp").rglob("*.py"), *root.joinpath("docs").rglob("*.md")]
    names = {m for p in texts if p.is_file() for m in re.findall(r"\baz\.([A-Za-z_]\w*)", p.read_text())}
    assert {"loo", "plot_ppc_dist"} <= names
    missing = sorted(n for n in names if not hasattr(az, n))
    assert not missing, f"not in arviz {az.__version__}: {missing}"
