"""What keeps `wizard-arena up`'s processes running: the API and the worker are children that
are started again when they die (with back-off, up to a limit past which `up` gives up and
says why), and the embedded Redis is started again on the same data folder.

Every child has a process group of its own (a terminal's Ctrl-C reaches `up` alone, which
then stops them in order) and gets a signal if `up` dies, however it dies (Linux's
parent-death signal, :func:`service.store.embedded_redis.die_with_parent`)."""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from service.store.embedded_redis import AofDamaged, EmbeddedRedis, die_with_parent, stop_processes


class GiveUp(RuntimeError):
    """A child cannot be kept running; the message says which and why."""


class PortTaken(RuntimeError):
    """The API's port cannot be listened on; the message names it and says what to do."""


def listen(host: str, port: int) -> socket.socket:
    """The API's listening socket, opened before anything else starts (so that a taken port
    stops `up` at once, with nothing to clean up) and handed to each API process in turn: a
    restarted API takes over the same socket, and connections wait in its backlog meanwhile."""
    try:
        sock = socket.create_server((host, port), backlog=2048)
    except OSError as error:
        raise PortTaken(
            f"cannot listen on {host}:{port} ({os.strerror(error.errno) if error.errno else error}): "
            + (f"port {port} is taken by another program. " if error.errno == errno.EADDRINUSE else "")
            + f"Stop it, or choose another port with --port (e.g. `wizard-arena up --port {port + 1}`, "
            f"`make run PORT={port + 1}`); nothing was started"
        ) from None
    sock.set_inheritable(True)
    return sock


@dataclass
class Restarts:
    """Back-off between restarts of a child (doubling from ``first`` to ``most`` seconds) and
    the limit: ``limit`` deaths, each within ``steady`` seconds of its start, in a row."""

    first: float = 1.0
    most: float = 30.0
    limit: int = 5
    steady: float = 60.0
    quick_deaths: int = 0

    def died(self, lived: float) -> float:
        """The wait before the next start, after a run of ``lived`` seconds (GiveUp past the limit)."""
        self.quick_deaths = 0 if lived >= self.steady else self.quick_deaths + 1
        if self.quick_deaths >= self.limit:
            raise GiveUp(f"it died {self.limit} times in a row, each within {self.steady:g} s of its start")
        return min(self.most, self.first * 2 ** max(0, self.quick_deaths - 1))


@dataclass
class Child:
    """A `wizard-arena` command `up` runs and keeps running."""

    name: str
    argv: Sequence[str]
    env: dict[str, str]
    pass_fds: tuple[int, ...] = ()
    #: how long it has to stop after SIGTERM before it is killed (with its group)
    stop_seconds: float = 30.0
    restarts: Restarts = field(default_factory=Restarts)
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    #: when to start it again after it died (None: running, or stopped)
    due: float | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            list(self.argv), env=self.env, stdin=subprocess.DEVNULL, pass_fds=self.pass_fds,
            preexec_fn=die_with_parent(signal.SIGTERM),  # a clean stop, even if `up` is killed -9
            process_group=0,  # its own group (with what it forks): Ctrl-C reaches `up`, which stops it
        )
        self.started = time.monotonic()
        self.due = None

    def stop(self) -> None:
        process, self.process = self.process, None
        stop_processes([process], self.stop_seconds, group=True)  # with what it forked (an RQ work horse)


class Supervisor:
    """Watches the children and the embedded Redis until ``stop`` is set; raises GiveUp when
    one cannot be kept running."""

    def __init__(
        self, children: Sequence[Child], redis: EmbeddedRedis | None, say: Callable[[str], None],
        redis_restarts: Restarts | None = None,
    ) -> None:
        self.children = list(children)
        self.redis = redis
        self.say = say
        self.redis_restarts = redis_restarts or Restarts(first=0.0, most=0.0, limit=3, steady=60.0)
        self._redis_started = time.monotonic()

    def watch(self, stop: threading.Event, every: float = 0.2) -> None:
        while not stop.wait(every):  # the signal handlers set it; a child's death is polled
            self._check_redis()
            now = time.monotonic()
            for child in self.children:
                if child.due is not None:
                    if now >= child.due:
                        self.say(f"starting the {child.name} again")
                        child.start()
                    continue
                assert child.process is not None
                status = child.process.poll()
                if status is None:
                    continue
                try:
                    wait = child.restarts.died(now - child.started)
                except GiveUp as error:
                    raise GiveUp(f"the {child.name} cannot be kept running: {error}; its last exit status was "
                                 f"{_status(status)} (its output is above)") from None
                self.say(f"the {child.name} exited ({_status(status)}); starting it again in {wait:g} s")
                child.due = now + wait

    def _check_redis(self) -> None:
        redis = self.redis
        if redis is None or redis.process is None:
            return
        status = redis.process.poll()
        if status is None:
            return
        log = redis.data_dir / "redis.log"
        try:
            self.redis_restarts.died(time.monotonic() - self._redis_started)
        except GiveUp as error:
            raise GiveUp(f"the embedded Redis cannot be kept running: {error} (see {log})") from None
        self.say(f"the embedded Redis exited ({_status(status)}); starting it again on the same data ({redis.data_dir})")
        redis.process = None
        try:
            redis.start()
        except AofDamaged as damaged:
            raise GiveUp(f"the embedded Redis cannot start again: {damaged}") from None
        except RuntimeError as error:
            raise GiveUp(f"the embedded Redis cannot start again: {error}") from None
        self._redis_started = time.monotonic()
        self.say(f"the embedded Redis is back: {redis.url}")


def _status(status: int) -> str:
    if status < 0:
        return f"killed by {signal.Signals(-status).name}"
    return f"exit status {status}"
