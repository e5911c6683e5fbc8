"""The numbers the README and the docs quote from benchmarks are their JSON's (``benchmarks/claims.py``), and
a results JSON measured on code that has changed since is flagged, not shown as current."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def claims():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location("claims", ROOT / "benchmarks" / "claims.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules["claims"] = mod  # dataclasses look their module up there
        spec.loader.exec_module(mod)
        yield mod
    finally:
        sys.modules.pop("claims", None)
        sys.path.remove(str(ROOT / "benchmarks"))


def test_every_quoted_number_is_its_json(claims):
    lost = claims.missing()
    assert not lost, "\n\n".join(f"{c.where}: '{c.name}' should read, from "
                                 f"benchmarks/results/{c.result}.json:\n{text}" for c, text in lost)


def test_every_benchmark_table_row_is_read_from_its_json(claims):
    """Every table row with a number on the pages that quote benchmarks is a claim's, or its table is marked,
    in the source, as not read from a results JSON (why, on the line before it)."""
    rows = claims.uncited_table_rows()
    assert not rows, "\n".join(f"{where}:{line}: {row}" for where, line, row in rows)


def test_a_table_row_typed_by_hand_is_found(claims):
    """Power: a row with a number added to a claimed table is reported, and so is one added under a table that
    is marked but whose marker is taken away; a marked table's rows are not."""
    where = "docs/benchmarks.md"
    text = (ROOT / where).read_text()
    row = "| SGPR bound + gradient, typed by hand | 0.100 | 0.100 | 1.00 / 1.00 / 1.00 | 1.00 | 0.1 s |"
    anchor = text.index("| SEP pass with gradient (20,000 rows, m = 100) | 0.238")  # shared_vocabulary's
    forged = text[:anchor] + row + "\n" + text[anchor:]
    assert [r for _, _, r in claims.uncited_table_rows({where: forged})] == [row]
    marker = text.index("\n|", text.index(claims.NOT_FROM_JSON + " earlier runs"))  # a marked table's
    marker = text.rindex(claims.NOT_FROM_JSON, 0, marker)
    unmarked = text[:marker] + "<!-- a comment -->" + text[text.index("-->", marker) + 3:]
    assert claims.uncited_table_rows({where: unmarked})


def test_every_benchmark_prose_number_is_read_from_its_json(claims):
    """Every measurement-like number (a decimal, or a count with a unit: s, %, ×, GB, nats…) in the prose and
    code blocks of the pages that quote benchmarks is a claim's, or its block is marked, in the source, as not
    read from a results JSON, with why (a setting, an earlier run whose JSON was overwritten, a measurement
    that wrote no JSON, a projection)."""
    found = claims.uncited_prose()
    assert not found, "\n".join(f"{where}:{line}: {what}" for where, line, what in found)


def test_a_prose_number_typed_by_hand_is_found(claims):
    """Power: a sentence with a measured number added to a claimed paragraph is reported (the number, not the
    claim's own numbers beside it); so are a marked block's numbers once its marker is taken away; versions
    and numbers in code spans are not measurements."""
    where = "README.md"
    text = (ROOT / where).read_text()
    anchor = text.index("Against the strongest sparse peer")
    sentence = "The fit took 12.5 s on 2 cores. "
    forged = text[:anchor] + sentence + text[anchor:]
    assert [w.split(" in:")[0] for _, _, w in claims.uncited_prose({where: forged})] == ["'12.5 s'"]
    marker = text.index(claims.NOT_FROM_JSON)
    unmarked = text[:marker] + "<!-- a comment -->" + text[text.index("-->", marker) + 3:]
    assert claims.uncited_prose({where: unmarked})
    plain = "Python ≥ 3.12, GPyTorch 1.15.2 and `tol=0.5` are no measurements. "
    plain = text[:anchor] + plain + text[anchor:]
    assert not claims.uncited_prose({where: plain})


def test_a_number_changed_by_hand_fails(claims):
    """Power: each claim's line with one digit of a number read from its JSON changed is reported missing."""
    import string

    for claim in claims.CLAIMS:
        text = claim.render()
        fields = [name for _, name, _, _ in string.Formatter().parse(claim.template) if name]
        values = claim.values(claims.load(claim.result))
        numbers = [str(values[f]) for f in fields if f in values]
        value = next((v for v in numbers if any(c.isdigit() for c in v)), None)
        if value is None:  # a claim of words read from the JSON ('identical'): one word changed
            value = next(v for v in numbers if v)
            forged = text.replace(value, value.upper() if value != value.upper() else value.lower(), 1)
        else:
            i = text.index(value) + next(j for j, ch in enumerate(value) if ch.isdigit())
            forged = text[:i] + str((int(text[i]) + 1) % 10) + text[i + 1:]
        assert claim in [c for c, _ in claims.missing({claim.where: forged}, [claim])], claim.name


def test_each_cited_json_records_what_it_measured(claims):
    for name in claims.cited_results():
        prov = json.loads((claims.RESULTS / f"{name}.json").read_text())["provenance"]
        assert prov["revision"] and len(prov["code_sha256"]) == 16 and prov["code"], name


def test_a_result_whose_code_changed_is_flagged(claims, tmp_path):
    """A JSON stamped with its code's hash is 'current' until a file of that code changes (or is added), and
    a JSON with no hash is flagged as never recorded; the docs' provenance table shows the flags."""
    code = tmp_path / "root" / "pkg"
    code.mkdir(parents=True)
    (code / "a.py").write_text("x = 1\n")
    results = tmp_path / "results"
    results.mkdir()
    stamp = {"revision": "abc1234", "code": ["pkg"],
             "code_sha256": claims.code_hash(["pkg"], tmp_path / "root")}
    (results / "r.json").write_text(json.dumps({"provenance": stamp}))
    (results / "old.json").write_text(json.dumps({"cases": {}}))
    assert claims.status("r", results, tmp_path / "root") == ("abc1234", "current")
    (code / "a.py").write_text("x = 2\n")
    assert claims.status("r", results, tmp_path / "root") == ("abc1234", "code changed since")
    (code / "a.py").write_text("x = 1\n")
    (code / "b.py").write_text("")
    assert claims.status("r", results, tmp_path / "root") == ("abc1234", "code changed since")
    assert claims.status("old", results, tmp_path / "root") == ("unknown", "code not recorded")


def test_the_provenance_table_lists_every_cited_result(claims):
    table = claims.provenance_table()
    for name in claims.cited_results():
        rev, state = claims.status(name)
        row = next(line for line in table.splitlines() if f"results/{name}.json" in line)
        assert rev in row and ("re-measure" in row) == (state != "current"), row
