"""Getting a dask.distributed Client: a scheduler address, the current default client, or a new local
cluster (a LocalCUDACluster where GPUs and dask-cuda are present)."""

from __future__ import annotations

import contextlib
import logging

from .backend import DEVICES, gpu_available

log = logging.getLogger(__name__)

__all__ = ["get_client", "gpu_available", "choose_device", "DEVICES", "borrowed_client", "close_client",
           "worker_environ", "probe_scheduler", "quiet_logs", "drop_sync_cancel_bug"]


def _dask_cuda_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("dask_cuda") is not None


def choose_device(device: str = "auto") -> tuple[str, str]:
    """('gpu' | 'cpu', why) for ``device``: 'cpu'; 'gpu' (ValueError naming what is missing when dask-cuda,
    cupy or a CUDA device is absent); 'auto' picks the GPU only when all three are present."""
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    if device == "cpu":
        return "cpu", "asked for"
    missing = [what for what, ok in (("dask-cuda", _dask_cuda_available()), ("cupy with a CUDA device",
                                                                            gpu_available())) if not ok]
    if not missing:
        return "gpu", "dask-cuda, cupy and a CUDA device found"
    if device == "gpu":
        raise ValueError(f"device='gpu' needs {' and '.join(missing)}: pip install -e '.[gpu]' on a machine "
                         "with an NVIDIA GPU, or use device='cpu'")
    return "cpu", f"no {' and no '.join(missing)}"


def get_client(address: str | None = None, *, n_workers: int | None = None, threads_per_worker: int = 1,
               device: str = "auto", timeout: float = 30, **cluster_kwargs):
    """A ``distributed.Client``.

    address : 'tcp://host:8786' to connect to a running dask-scheduler; None to reuse the default client
        of this process or, failing that, start a local cluster (processes, dashboard on 127.0.0.1 at a free
        port unless ``dashboard_address`` is given).
    device : for a new local cluster (ignored with ``address``; checked with a default client): 'cpu',
        'gpu' (dask-cuda's LocalCUDACluster, one worker per GPU unless ``n_workers``; a clear ValueError
        when dask-cuda, cupy or a GPU is missing) or 'auto' (the GPU only when all three are present; the
        choice is logged at INFO with its reason).

    Raises ``ConnectionError`` with the address when the scheduler cannot be reached. Close a client this
    made with :func:`close_client`, which closes a local cluster it started too (``client.close()`` alone
    leaves the cluster's workers running, idle but awake, until the process ends).
    """
    import dask
    from distributed import Client

    if device not in DEVICES:  # before anything connects
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    # a remote scheduler's workers are what they are: this machine is probed only when no address is given
    chosen, why = choose_device(device) if address is None else ("", "")
    if address is not None:
        probe_scheduler(address, timeout)
        try:
            client = Client(address, timeout=timeout)
        except (OSError, TimeoutError) as e:
            raise ConnectionError(f"cannot reach the dask scheduler at {address}: {e}") from None
        try:  # a scheduler without workers would queue every task forever
            client.wait_for_workers(1, timeout=timeout)
        except TimeoutError:
            client.close()
            raise ConnectionError(f"the dask scheduler at {address} has no workers (waited {timeout:g} s; "
                                  f"start some with 'dask worker {address}' or raise --timeout)") from None
        return client
    try:
        from distributed import default_client

        return default_client()
    except ValueError:
        pass
    check_script_guard()
    if device == "auto":
        log.info("daskgp: local cluster on %s (%s)", chosen.upper(), why)
    with dask.config.set({"distributed.nanny.pre-spawn-environ": worker_environ()}), _sigint_ignored():
        cluster = _local_cluster(chosen == "gpu", n_workers, threads_per_worker, cluster_kwargs)
    client = Client(cluster)
    client.wait_for_workers(1, timeout=timeout)
    return client


# A Dask TCP listener speaks first: it writes its handshake (a msgpack dict of compression, python and
# pickle-protocol versions, ~100 bytes) as soon as a connection opens, after an 8-byte little-endian length.
_HANDSHAKE_MAX_BYTES = 1 << 16
_HANDSHAKE_KEYS = (b"compression", b"python", b"pickle-protocol")


def probe_scheduler(address: str, timeout: float) -> None:
    """Raise ConnectionError unless ``address`` (tcp://host:port, or host:port) answers as a Dask scheduler
    within ``timeout`` seconds. distributed's own connect trusts the first 8 bytes it reads as a length (a
    non-Dask service made it allocate exbibytes) and waits for the handshake without a limit (an HTTP server
    never speaks first); this reads at most 64 KiB under a deadline. The server's handshake is sent back as
    ours, so the scheduler sees an ordinary client leave. Other protocols (tls://, ucx://) are not probed."""
    import socket
    import struct
    import time

    if timeout <= 0:
        raise ValueError(f"--timeout must be > 0 seconds, got {timeout}")
    proto, _, rest = address.rpartition("://")
    if proto not in ("", "tcp", "tls", "ucx"):  # inproc:// lives in one process: no address to give
        raise ValueError(f"a scheduler address is tcp://host:port (or tls://, ucx://), got {address!r}")
    if proto not in ("", "tcp"):
        return
    host, _, port = rest.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"a scheduler address is tcp://host:port, got {address!r}")
    deadline = time.monotonic() + timeout

    def read(sock, k: int) -> bytes:
        buf = b""
        while len(buf) < k:
            sock.settimeout(max(1e-3, deadline - time.monotonic()))
            part = sock.recv(k - len(buf))
            if not part:
                raise _NotDask("closed the connection without a Dask handshake")
            buf += part
        return buf

    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout) as sock:
            head = read(sock, 8)
            (size,) = struct.unpack("<Q", head)
            if not 0 < size <= _HANDSHAKE_MAX_BYTES:
                raise _NotDask("does not speak Dask's protocol")
            body = read(sock, size)
            if not all(k in body for k in _HANDSHAKE_KEYS):
                raise _NotDask("does not speak Dask's protocol")
            sock.sendall(head + body)
    except _NotDask as e:
        raise ConnectionError(f"{address} is not a Dask scheduler: it {e}") from None
    except TimeoutError:
        raise ConnectionError(f"{address} did not answer as a Dask scheduler within {timeout:g} s") from None
    except OSError as e:
        raise ConnectionError(f"cannot reach the dask scheduler at {address}: {e}") from None


class _NotDask(Exception):
    pass


# Distributed's nannies export MALLOC_TRIM_THRESHOLD_=65536 to their workers; setting any malloc threshold
# turns off glibc's dynamic mmap threshold, so every array above 128 KiB is then mmap'd and page-faulted
# afresh. The CG and kernel-tile temporaries are such arrays: an SGHMC iteration on concrete took 0.16 s in a
# worker against 0.07 s in a plain process. A 32 MiB mmap threshold keeps them on the heap.
MMAP_THRESHOLD = 32 * 2**20


def worker_environ() -> dict:
    """The environment the local cluster's workers start with: distributed's own (single-threaded BLAS,
    malloc trimming) plus ``MALLOC_MMAP_THRESHOLD_`` (see ``MMAP_THRESHOLD``). Workers started by hand
    against a dask-scheduler should export the same variable."""
    import dask
    import distributed  # noqa: F401  (registers distributed's configuration defaults)

    env = dict(dask.config.get("distributed.nanny.pre-spawn-environ", {}) or {})
    env.setdefault("MALLOC_MMAP_THRESHOLD_", MMAP_THRESHOLD)
    return env


def check_script_guard() -> None:
    """Refuse, in one line, to start a local cluster from a script's top-level code outside ``if __name__ ==
    "__main__":``. The cluster's worker processes are spawned and import the main script; unguarded, each
    would run the script again and start its own cluster, and the first thing a newcomer saw was 27 KB of
    "Nanny failed to start" tracebacks. Reads the script's source (never runs it) to find the line that
    called daskgp; Jupyter, ``python -c`` and code under the guard or in an imported module pass."""
    import ast
    import sys

    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or not path or not str(path).endswith(".py"):
        return
    frame, line = sys._getframe(1), None
    while frame is not None:  # the outermost frame running the script's own top-level code
        if frame.f_code.co_name == "<module>" and frame.f_globals is main.__dict__:
            line = frame.f_lineno
        frame = frame.f_back
    if line is None:
        return
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return
    for node in tree.body:
        if isinstance(node, ast.If) and node.lineno <= line <= (node.end_lineno or node.lineno):
            t = node.test
            if (isinstance(t, ast.Compare) and isinstance(t.left, ast.Name) and t.left.id == "__name__"
                    and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in t.comparators)):
                return
    raise RuntimeError(f"{path}, line {line}, starts a local Dask cluster outside 'if __name__ == "
                       "\"__main__\":' — its worker processes import the script and would run it again: put "
                       "the script's code under that guard (or pass client= / scheduler= to use a running "
                       "cluster)")


def _local_cluster(want_gpu: bool, n_workers, threads_per_worker, cluster_kwargs):
    from distributed import LocalCluster

    # this machine only (distributed's ':port' binds every interface), a free port: no clash with others
    cluster_kwargs.setdefault("dashboard_address", "127.0.0.1:0")
    cluster_kwargs.setdefault("host", "127.0.0.1")  # scheduler and workers too
    if want_gpu:
        # one worker per GPU by default (dask-cuda's CUDA_VISIBLE_DEVICES); the user's counts as on CPU.
        # Not yet run on a real GPU (README, "GPU").
        from dask_cuda import LocalCUDACluster

        if n_workers is not None:
            cluster_kwargs.setdefault("n_workers", n_workers)
        return LocalCUDACluster(threads_per_worker=threads_per_worker, **cluster_kwargs)
    return LocalCluster(n_workers=n_workers, threads_per_worker=threads_per_worker, processes=True,
                        **cluster_kwargs)


@contextlib.contextmanager
def _sigint_ignored():
    """SIGINT ignored while the local cluster's worker processes are spawned, which keep that disposition
    (an ignored signal stays ignored across exec): a terminal's Ctrl-C reaches the whole process group, and
    workers that took it each printed a KeyboardInterrupt traceback. The command that started them handles
    the interruption and closes the cluster. Only the main thread may change signal handlers."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def quiet_logs() -> None:
    """Only critical messages from distributed, tornado and asyncio in this process (run on the workers too
    with ``client.run(quiet_logs)``), for a teardown that is expected."""
    import logging

    for name in ("distributed", "tornado", "asyncio"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def quiet_data_errors() -> None:
    """On a worker (``client.run(quiet_data_errors)``): drop distributed's "Compute Failed" log of a task
    that raised a daskgp ``DataError`` (bad values in a file the worker read), whose traceback would print
    before the command's own one-line message; every other failure is still logged."""
    import logging

    class _DropDataErrors(logging.Filter):
        def filter(self, record) -> bool:
            if "Compute Failed" not in str(record.msg):
                return True
            msg = record.getMessage()
            return not ("DataError(" in msg or "NonFiniteError(" in msg)

    log = logging.getLogger("distributed.worker")
    if not any(type(f).__name__ == "_DropDataErrors" for f in log.filters):
        log.addFilter(_DropDataErrors())


def _is_sync_cancel_bug(record) -> bool:
    """The one record distributed 2026.8's ``sync`` logs when a Ctrl-C reaches it before its coroutine has
    started: its ``cancel`` callback reads the not yet assigned ``future`` and tornado logs a NameError with
    a traceback. The interrupt itself propagates correctly; only the log is spurious."""
    exc = record.exc_info[1] if record.exc_info else None
    if not isinstance(exc, NameError) or "'future'" not in str(exc):
        return False
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_name == "cancel" and \
        tb.tb_frame.f_code.co_filename.replace("\\", "/").endswith("distributed/utils.py")


def drop_sync_cancel_bug() -> None:
    """Filter out of tornado's callback log the spurious NameError of :func:`_is_sync_cancel_bug` (every
    other record passes). Installed once by the command line, whose first Ctrl-C it would otherwise turn into
    a 12-line traceback above the one-line hint."""
    logger = logging.getLogger("tornado.application")
    if not any(getattr(f, "_daskgp_sync_cancel", False) for f in logger.filters):
        filt = logging.Filter()
        filt.filter = lambda record: not _is_sync_cancel_bug(record)
        filt._daskgp_sync_cancel = True
        logger.addFilter(filt)


def cluster_workers(client) -> dict[str, dict]:
    """The cluster's workers now: {address: the scheduler's record of it (nthreads, memory_limit, ...)},
    fetched from the scheduler on every call.

    Not ``client.scheduler_info()["workers"]``: that returns the client's cached identity, which its own
    periodic refresh overwrites with a copy that lists no workers (distributed 2026.8 refreshes with
    ``n_workers=0``); a read that lands between the fetch and the return then sees an empty cluster."""
    return dict(client.sync(client.scheduler.identity, n_workers=-1)["workers"])


def close_client(client) -> None:
    """Close a client and, if it started its own local cluster, that cluster too. Before closing its own
    cluster it quiets the workers' logs (:func:`quiet_logs`): a worker whose heartbeat meets the scheduler
    already closing logs "Failed to communicate with scheduler during heartbeat" with a traceback, into the
    command's or script's stderr, for a teardown that is planned (seen once, at the end of a one-chain
    ``daskgp sample`` in the test suite). A remote scheduler's workers are not ours to quiet."""
    cluster = getattr(client, "cluster", None)  # None for a client of a remote scheduler
    if cluster is not None:
        with contextlib.suppress(Exception):  # a worker already gone has nothing left to print
            client.run(quiet_logs)
    client.close()
    if cluster is not None:
        cluster.close()


class borrowed_client:
    """``with borrowed_client(client, address) as c:`` — the given client, else one for ``address``, else the
    process's default client, else a new local cluster; on exit closes only what it started itself."""

    def __init__(self, client=None, address: str | None = None, **kwargs):
        self.client, self.address, self.kwargs = client, address, kwargs
        self.owned = False

    def __enter__(self):
        if self.client is None:
            if self.address is None:
                try:
                    from distributed import default_client

                    self.client = default_client()
                    return self.client
                except ValueError:
                    pass
            self.client = get_client(self.address, **self.kwargs)
            self.owned = True
        return self.client

    def __exit__(self, *exc):
        if self.owned:
            close_client(self.client)
        return False
