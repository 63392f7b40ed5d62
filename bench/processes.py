"""The child processes of one benchmark: :class:`BenchProcesses` starts ``wizard-arena``
commands (``serve``, ``worker``) with their output in log files of a temporary folder, and
stops them whatever happens inside it (an error, Ctrl-C, SIGTERM). ``bench.deadlines.Arena``
(one embedded Redis, serve, workers) and ``bench.cluster.Sides`` (serve processes on one
Redis server and on a cluster) are made of it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

from bench.service import UNLIMITED_CLIENTS
from service.store.embedded_redis import stop_processes

#: how long the children have to stop after SIGTERM before their process groups are killed
STOP_SECONDS = 15.0


class BenchProcesses:
    """A context manager: :meth:`_start` (a subclass's) starts what the benchmark runs on,
    and on exit, or when starting fails, the children :meth:`spawn` started are stopped
    (each leads a process group of its own, which goes with it: a worker's RQ work horse),
    then :meth:`_stop_redis` stops the Redis they ran on. SIGTERM is turned into an
    exception meanwhile, so that this cleaning up runs. The log folder is removed unless the
    benchmark failed (its path is then printed to stderr)."""

    def __init__(self, folder_prefix: str = "wza-bench-") -> None:
        self.folder = Path(tempfile.mkdtemp(prefix=folder_prefix))
        self._children: list[subprocess.Popen[bytes]] = []
        self._logs: list[IO[bytes]] = []
        self._previous_sigterm: Any = None

    def __enter__(self) -> Self:
        if threading.current_thread() is threading.main_thread():
            # SIGTERM as an exception, so that __exit__ runs and nothing is left behind
            self._previous_sigterm = signal.signal(signal.SIGTERM, _raise_on_sigterm)
        try:
            self._start()
        except BaseException:
            self._stop(failed=True)
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self._stop(failed=kind is not None)

    def _start(self) -> None:
        raise NotImplementedError

    def _stop_redis(self) -> None:
        """Stop the Redis that :meth:`_start` started for the children (after them)."""

    def spawn(self, args: list[str], env: dict[str, str], log_name: str) -> subprocess.Popen[bytes]:
        """``wizard-arena <args>`` with ``env``, its output in ``log_name`` in the folder."""
        log = open(self.folder / log_name, "wb")
        self._logs.append(log)
        process = subprocess.Popen(
            [sys.executable, "-m", "wizard_arena", *args], env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            start_new_session=True,  # Ctrl-C reaches this process only, which then stops the children
        )
        self._children.append(process)
        return process

    def spawn_serve(
        self, name: str, port: int, redis_url: str, env: dict[str, str], log_level: str = "warning"
    ) -> subprocess.Popen[bytes]:
        """A ``serve`` process on ``port`` and ``redis_url`` whose limits let the benchmark's
        clients, all on this machine, make as many bots and requests as they like; ``env``
        on top. Its log is ``<name>.log``."""
        return self.spawn(
            ["serve", "--port", str(port), "--log-level", log_level],
            {**os.environ, "REDIS_URL": redis_url, **UNLIMITED_CLIENTS, **env}, f"{name}.log",
        )

    def _stop(self, failed: bool) -> None:
        stop_processes(self._children, STOP_SECONDS, group=True)
        self._children = []
        self._stop_redis()
        for log in self._logs:
            log.close()
        self._logs = []
        if self._previous_sigterm is not None:
            signal.signal(signal.SIGTERM, self._previous_sigterm)
            self._previous_sigterm = None
        if failed:
            print(f"benchmark failed: the processes' logs are in {self.folder}", file=sys.stderr)
        else:
            shutil.rmtree(self.folder, ignore_errors=True)


def _raise_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)
