"""`wizard-arena up` as the tests run it: on a data folder of the test's, a free port and no
REDIS_URL, its output in a file; and what the tests read about processes from /proc."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

from service.store.embedded_redis import stop_processes
from tests.service.arena_client import REPO, Api, free_port, wait_until


def up_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    return {**env, "ARENA_DATA_DIR": str(data_dir), **extra}


def up_args(port: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "wizard_arena", "up", "--port", str(port), "--log-level", "warning", *extra]


class Up:
    """One `wizard-arena up` process (not in a group of its own: a signal to it is to it alone),
    or, given ``argv``, any command that serves the API on ``port``."""

    def __init__(
        self, data_dir: Path, log: Path, *extra: str, port: int | None = None, argv: list[str] | None = None,
        env: dict[str, str] | None = None, new_session: bool = False, **settings: str,
    ) -> None:
        """``up --port <port> <extra>`` with ``settings`` (env vars) on ``data_dir``; or, given,
        ``argv`` and ``env`` as they are."""
        self.data_dir = data_dir
        self.port = port or free_port()
        self.log = log
        with log.open("wb") as out:
            self.popen = subprocess.Popen(
                argv or up_args(self.port, *extra), env=env or up_env(data_dir, **settings), cwd=REPO,
                stdout=out, stderr=subprocess.STDOUT,
                start_new_session=new_session,  # a group of its own, as a terminal gives it: killpg is Ctrl-C
            )
        self.pid = self.popen.pid
        self.api = Api(self, self.port)  # type: ignore[arg-type]  # Api wants .popen and .output()

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_healthy(self) -> Up:
        self.api.wait_healthy(60)
        return self

    def descendants(self) -> dict[int, str]:
        return descendants(self.pid)

    def children(self) -> dict[int, str]:
        """Its own children (the embedded Redis and the worker), not theirs (an RQ job's
        work horse comes and goes)."""
        return descendants(self.pid, depth=1)

    def stop(self) -> None:
        self.api.close()
        stop_processes([self.popen], 40)


def run_up(data_dir: Path, *extra: str, port: int | None = None, timeout: float = 60, **env: str) -> subprocess.CompletedProcess[str]:
    """`up` run to its end (one that refuses to start); its output and exit status."""
    return subprocess.run(
        up_args(port or free_port(), *extra), env=up_env(data_dir, **env), cwd=REPO,
        capture_output=True, text=True, timeout=timeout,
    )


# ------------------------------------------------------------------------------ /proc
def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie has let go of everything: not running)."""
    fields = _stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def descendants(pid: int, depth: int = 1_000) -> dict[int, str]:
    """Every live process below ``pid`` (down to ``depth`` generations): pid -> command line."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields is not None and fields[0] not in ("Z", "X"):
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: dict[int, str] = {}
    generation = children.get(pid, [])
    for _ in range(depth):
        for child in generation:
            found[child] = command_line(child)
        generation = [grandchild for child in generation for grandchild in children.get(child, [])]
    return found


def redis_server_pids(data_dir: Path) -> set[int]:
    """Live redis-server processes whose socket is in ``data_dir``."""
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and running(int(entry.name)):
            line = command_line(int(entry.name))
            if "redis-server" in line and str(data_dir) in line:
                pids.add(int(entry.name))
    return pids


def wait_gone(pids: set[int] | dict[int, str], what: str, timeout: float = 30) -> None:
    wait_until(lambda: not [p for p in pids if running(p)] or None, what, timeout=timeout)


def redis_lifetimes(log: Path) -> list[tuple[str, str]]:
    """The embedded Redis servers' starts and ends, in the order of their shared log:
    (pid, "start" | "ready" | "exit")."""
    events = []
    for line in log.read_text(errors="replace").splitlines():
        pid = line.split(":", 1)[0]
        if "Redis is starting" in line:
            events.append((pid, "start"))
        elif "Ready to accept connections" in line:
            events.append((pid, "ready"))
        elif "ready to exit, bye bye" in line:
            events.append((pid, "exit"))
    return events


def assert_one_redis_at_a_time(log: Path) -> int:
    """No two Redis servers ever had the data folder (its append-only file) at once, and
    every one that ended shut down cleanly; how many started."""
    events = redis_lifetimes(log)
    live: str | None = None
    for pid, event in events:
        if event == "start":
            assert live is None, f"Redis {pid} started while Redis {live} still had the folder:\n{events}"
            live = pid
        elif event == "exit":
            assert pid == live, f"unexpected end of Redis {pid}: {events}"
            live = None
    return sum(1 for _, event in events if event == "start")


def healthz(port: int) -> int:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code
    except httpx.TransportError:
        return 0

