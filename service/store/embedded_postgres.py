"""A real PostgreSQL 16 for machines that have none: the server the ``pgserver`` wheel ships,
run as a child process on a Unix socket in a local folder, as :mod:`embedded_redis` runs
Redis. `wizard-arena up` starts one for the archive when ``DATABASE_URL`` is unset; the tests
start one of their own.

The folder is made once with ``initdb`` (trust authentication: nothing listens but the
socket, in a folder only its owner reaches). PostgreSQL refuses to run as root: under root,
the server (and ``initdb``) run as a system user of their own, ``pgserver`` (made with
``useradd`` the first time, as the pgserver package itself does), which owns the folder.
Like the embedded Redis, the server gets a signal when its parent dies, however it dies:
SIGINT, PostgreSQL's "fast" shutdown, which ends the sessions and writes a checkpoint.
"""

from __future__ import annotations

import fcntl
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

from service.store.embedded_redis import die_with_parent, stop_processes

#: the system user the server runs as when started by root
SYSTEM_USER = "pgserver"
DATABASE = "postgres"
#: where `up`'s server lives in its data folder (ARENA_DATA_DIR)
UP_FOLDER = "postgres"


def _binaries() -> Path:
    with warnings.catch_warnings():  # its import looks for a runtime folder it is not asked to use
        warnings.simplefilter("ignore")
        from pgserver._commands import POSTGRES_BIN_PATH  # the wheel's own PostgreSQL

    return Path(POSTGRES_BIN_PATH)


def system_user(name: str) -> pwd.struct_passwd:
    """The system user ``name``, made with ``useradd`` if there is none yet (as root). Processes
    that start servers at once (the test tiers' two workers on a fresh machine) make it one at
    a time, under a lock: otherwise the second ``useradd`` fails, the name being taken since
    it looked."""
    with open(Path(tempfile.gettempdir()) / f"wizard-arena-useradd-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        try:
            return pwd.getpwnam(name)
        except KeyError:
            subprocess.run(["useradd", "--system", "--no-create-home", name], check=True, capture_output=True)
            return pwd.getpwnam(name)


def _url(socket_dir: Path | str) -> str:
    return f"postgresql://postgres@/{DATABASE}?host={socket_dir}"


class EmbeddedPostgres:
    """``postgres`` on a Unix socket in ``data_dir`` (made with ``initdb`` the first time).

    Where it keeps what is in ``data_dir`` is this class's business alone: other commands
    (``wizard-arena backup``) ask it (:meth:`running_url`) rather than look."""

    def __init__(self, data_dir: Path, socket_dir: Path | None = None) -> None:
        """``socket_dir``: where the socket goes, kept across restarts (so its URL stays the
        same); by default a short folder of its own made at each start."""
        self.data_dir = Path(data_dir).resolve()
        self.process: subprocess.Popen[bytes] | None = None
        self._fixed_socket_dir = None if socket_dir is None else Path(socket_dir).resolve()
        self._socket_dir: Path | None = None
        self._user: pwd.struct_passwd | None = None

    @classmethod
    def of_up(cls, arena_data_dir: Path | str) -> EmbeddedPostgres:
        """The server `wizard-arena up` runs in its data folder (``ARENA_DATA_DIR``)."""
        return cls(Path(arena_data_dir) / UP_FOLDER)

    @property
    def pgdata(self) -> Path:
        """The database cluster's folder (``initdb``'s, ``postgres -D``)."""
        return self.data_dir / "pgdata"

    @property
    def url(self) -> str:
        assert self._socket_dir is not None, "start the server first"
        return _url(self._socket_dir)

    def running_url(self) -> str | None:
        """The URL of the server running on this folder, whichever process started it (its
        ``postmaster.pid`` names the socket's folder), or None when none runs."""
        try:
            lines = (self.pgdata / "postmaster.pid").read_text().splitlines()
        except FileNotFoundError:
            return None
        return _url(lines[4]) if len(lines) > 4 and lines[4] else None

    def _as_user(self) -> pwd.struct_passwd | None:
        return system_user(SYSTEM_USER) if os.geteuid() == 0 else None

    def _hand_over(self, path: Path) -> None:
        """Let the server's user own ``path`` and reach it (and the binaries) through its parents."""
        if self._user is None:
            return
        os.chown(path, self._user.pw_uid, self._user.pw_gid)
        for parent in [*path.parents, *_binaries().parents]:
            mode = parent.stat().st_mode
            if mode & 0o011 != 0o011:
                parent.chmod(mode | 0o011)  # traverse only: nothing of the parents becomes readable

    def _run_as(self) -> tuple[int | None, int | None]:
        """(user, group) for subprocess: the server's own under root, else this process's."""
        return (None, None) if self._user is None else (self._user.pw_uid, self._user.pw_gid)

    def start(self, timeout: float = 30.0) -> str:
        self._user = self._as_user()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._hand_over(self.data_dir)
        pgdata = self.pgdata
        user, group = self._run_as()
        if not (pgdata / "PG_VERSION").exists():
            shutil.rmtree(pgdata, ignore_errors=True)  # a first initdb that did not finish
            subprocess.run(
                [str(_binaries() / "initdb"), "-D", str(pgdata), "--auth=trust", "--encoding=utf8", "-U", "postgres",
                 "--no-instructions"],
                check=True, capture_output=True, user=user, group=group,
            )
        # Unix socket paths are limited to ~107 bytes: the socket gets a short folder of its own
        if self._fixed_socket_dir is not None:
            self._fixed_socket_dir.mkdir(parents=True, exist_ok=True)
            self._socket_dir = self._fixed_socket_dir
        else:
            self._socket_dir = Path(tempfile.mkdtemp(prefix="wza-pg-"))
        self._hand_over(self._socket_dir)
        log = self.data_dir / "postgres.log"
        with open(log, "ab") as log_file:
            self.process = subprocess.Popen(
                [
                    str(_binaries() / "postgres"), "-D", str(pgdata),
                    "-k", str(self._socket_dir), "-h", "",  # the socket only, no TCP
                    "-c", "max_connections=200",
                    "-c", "shared_buffers=64MB",
                ],
                stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent(signal.SIGINT),  # "fast" shutdown if this process dies
                process_group=0,  # the terminal's Ctrl-C reaches the parent, which stops it in order
                user=user, group=group,
            )
        socket = self._socket_dir / ".s.PGSQL.5432"
        end = time.monotonic() + timeout
        while not self._ready(socket):
            if self.process.poll() is not None:
                self.stop()
                raise RuntimeError(f"the embedded PostgreSQL server exited; see {log}")
            if time.monotonic() > end:
                self.stop()
                raise RuntimeError(f"the embedded PostgreSQL server did not start in {timeout} s; see {log}")
            time.sleep(0.05)  # the child's socket: nothing to wait on but its appearance and answer
        return self.url

    def _ready(self, socket: Path) -> bool:
        if not socket.exists():
            return False
        answer = subprocess.run(
            [str(_binaries() / "pg_isready"), "-h", str(self._socket_dir), "-d", DATABASE, "-U", "postgres", "-q"],
            check=False,
        )
        return answer.returncode == 0

    def stop(self) -> None:
        stop_processes([self.process], 30, signal.SIGINT)  # "fast" shutdown: sessions ended, a checkpoint
        self.process = None
        if self._socket_dir is not None and self._socket_dir != self._fixed_socket_dir:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
        self._socket_dir = None

    def __enter__(self) -> EmbeddedPostgres:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
