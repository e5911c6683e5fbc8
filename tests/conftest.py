import os
import signal
from pathlib import Path

import numpy as np
import pytest

# Tests read the real data in ../shared/data through the project's loader unless told otherwise.
_SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
if not os.environ.get("DASKGP_DATA") and _SHARED.is_dir():
    os.environ["DASKGP_DATA"] = str(_SHARED)
elif os.environ.get("DASKGP_DATA"):  # relative to where pytest started; tests run commands in other folders
    os.environ["DASKGP_DATA"] = os.path.abspath(os.environ["DASKGP_DATA"])

# A test run started in the background of a non-interactive shell (a CI script's `cmd &`) inherits SIGINT
# ignored, and Python then installs no KeyboardInterrupt handler in it or in any subprocess it starts: every
# Ctrl-C test would see its command run to the end. A handler here is reset to the default in each child.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Scheduling by measured time. tests/durations.json holds each test's seconds (setup + call + teardown) from
# a full run on this 2-core machine (`make durations` writes it). The files are sorted longest first by their
# summed seconds, tests within a file keep their order, and under `pytest -n 2 --dist loadfile` (the Makefile)
# a process is handed the next file only when it is down to its last test (xdist's own LoadFileScheduling
# hands out a second file as soon as two tests are left, and its default reorder sorts files by test count).
# A test missing from the file (a new one) counts as DEFAULT_SECONDS until the file is measured again.
DURATIONS = Path(__file__).with_name("durations.json")
DEFAULT_SECONDS = 5.0


def measured_seconds() -> dict[str, float]:
    """{test node id: seconds} from tests/durations.json, or {} when it is absent or unreadable."""
    import json

    try:
        return {str(k): float(v) for k, v in json.loads(DURATIONS.read_text())["seconds"].items()}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def file_seconds(nodeids, seconds: dict[str, float]) -> dict[str, float]:
    """{test file: summed measured seconds of its tests among ``nodeids``}."""
    total: dict[str, float] = {}
    for nodeid in nodeids:
        name = nodeid.split("::", 1)[0]
        total[name] = total.get(name, 0.0) + seconds.get(nodeid, DEFAULT_SECONDS)
    return total


def pytest_addoption(parser):
    parser.addoption("--write-durations", metavar="PATH", default=None,
                     help="write each test's seconds (setup + call + teardown) to PATH as JSON "
                          "(what tests/durations.json holds)")


def pytest_collection_modifyitems(config, items):
    totals = file_seconds([item.nodeid for item in items], measured_seconds())
    order = {name: i for i, name in enumerate(sorted(totals, key=lambda name: -totals[name]))}
    items.sort(key=lambda item: order[item.nodeid.split("::", 1)[0]])  # stable: a file keeps its order


@pytest.hookimpl(optionalhook=True)  # xdist's hook: a run without xdist ignores it
def pytest_xdist_make_scheduler(config, log):
    """Under ``--dist loadfile``: whole files, in collection order (longest first), each handed out only when
    a process is down to its last test. Other modes: xdist's own scheduler."""
    if config.getoption("dist", None) != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class LongestFileFirst(LoadFileScheduling):
        def _reschedule(self, node):
            if node.shutting_down:
                return
            if not self.workqueue:
                node.shutdown()
                return
            # a worker holds back its last test until it knows the next one (for fixture teardown), so
            # "down to one pending test" is as late as a file can be handed out without stalling it
            if self._pending_of(self.assigned_work[node]) > 1:
                return
            self._assign_work_unit(node)

    config.option.loadscopereorder = False  # keep the measured order, not xdist's count-of-tests order
    return LongestFileFirst(config, log)


_durations: dict[str, float] = {}


def pytest_runtest_logreport(report):
    # the controller sees every worker's reports (and a run without xdist its own); a worker's own sums are
    # never written
    _durations[report.nodeid] = _durations.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session, exitstatus):
    path = session.config.getoption("--write-durations")
    if not path or hasattr(session.config, "workerinput"):
        return
    import datetime
    import json
    import subprocess

    revision = subprocess.run(["git", "-C", str(Path(__file__).parent), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True).stdout.strip()
    doc = {"measured": {"revision": revision, "date": datetime.date.today().isoformat(),
                        "cpus": os.cpu_count(), "exit_status": int(exitstatus),
                        "total_seconds": round(sum(_durations.values()), 1)},
           "seconds": {k: round(v, 2) for k, v in sorted(_durations.items(), key=lambda kv: -kv[1])}}
    Path(path).write_text(json.dumps(doc, indent=1) + "\n")


@pytest.fixture(scope="session")
def concrete():
    """concrete's 1,030 rows, shared by every test of a process: its arrays are read-only, so that a test or
    a library call that wrote into them fails where it writes instead of changing later tests' data."""
    import daskgp

    data = daskgp.load("concrete")
    for a in (data.X, data.y, data.X_std, data.y_std):
        a.flags.writeable = False
    return data


@pytest.fixture
def rng():
    return np.random.default_rng(20261122)


@pytest.fixture(scope="module")
def client():
    """A real two-worker dask.distributed LocalCluster, its workers started with the library's environment."""
    import dask
    from distributed import Client, LocalCluster

    from daskgp.compute.cluster import worker_environ

    with dask.config.set({"distributed.nanny.pre-spawn-environ": worker_environ()}):
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                               dashboard_address="127.0.0.1:0", memory_limit="4GiB")
    with cluster, Client(cluster) as c:
        c.wait_for_workers(2, timeout=60)
        yield c
