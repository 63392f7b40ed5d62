"""An outage of Redis or of the archive's database as the logs tell it: one line when it
starts, one when it ends, and back-off in between, never a traceback per request or per
tick of the clock (what the clock logged while Redis was away: a thousand lines in 10 s).

:class:`Outage` is one dependency's; the worker's clock drives it from its loop.
:class:`Outages` is the API process's: a request that met an outage reports it (its client
is answered ``UNAVAILABLE``), and a probe with back-off finds when it ends."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from service.errors import unavailable_dependency


class Outage:
    """One dependency's outage: :meth:`failed` at each failure (logs the first, gives the
    wait before the next try, doubling from ``first`` to ``most``), :meth:`recovered` at the
    first success after (logs how long it lasted); with no ``log``, it only backs off (another
    part of the process says the outage)."""

    def __init__(self, what: str, log: logging.Logger | None, first: float = 0.5, most: float = 5.0) -> None:
        self.what = what
        self.log = log
        self.first = first
        self.most = most
        self.since: float | None = None
        self.failures = 0
        self._wait = first

    @property
    def down(self) -> bool:
        return self.since is not None

    def failed(self, error: BaseException) -> float:
        if self.since is None:
            self.since = time.monotonic()
            if self.log is not None:  # (None: another part of the process says it)
                self.log.warning(
                    "%s is unavailable (%s: %s); retrying with back-off up to %g s, and saying here when it is back",
                    self.what, type(error).__name__, error, self.most,
                )
        self.failures += 1
        wait, self._wait = self._wait, min(self._wait * 2, self.most)
        return wait

    def after(self, error: BaseException, report: Callable[[], object]) -> float:
        """The wait before a loop tries again after ``error``: a dependency away is an outage
        (:meth:`failed`: said once, backed off); any other failure is ``report``-ed (called in
        the ``except`` block: it may log the traceback) and tried again in half a second."""
        if unavailable_dependency(error) is None:
            report()
            return 0.5
        return self.failed(error)

    def recovered(self) -> None:
        if self.since is not None and self.log is not None:
            self.log.warning(
                "%s is back after %.1f s (%d failed attempts meanwhile)", self.what, time.monotonic() - self.since,
                self.failures,
            )
        self.since = None
        self.failures = 0
        self._wait = self.first


class Outages:
    """The outages one API process sees, by dependency ("Redis", "the archive"), each with a
    probe (a ping) that the watch of an outage retries with back-off until it answers."""

    def __init__(self, probes: dict[str, Callable[[], Awaitable[object]]], log: logging.Logger | None = None) -> None:
        log = log or logging.getLogger("wizard_arena.outage")
        self._outages = {what: Outage(what, log) for what in probes}
        self._probes = probes
        self._watches: dict[str, asyncio.Task[None]] = {}

    def report(self, error: BaseException) -> None:
        """A request met ``error``; if it says a dependency is away, the outage starts (once)."""
        what = unavailable_dependency(error)
        outage = self._outages.get(what or "")
        if outage is None or what is None:
            return
        if not outage.down:
            wait = outage.failed(error)
            self._watches[what] = asyncio.get_running_loop().create_task(self._watch(outage, wait))

    async def _watch(self, outage: Outage, wait: float) -> None:
        while True:
            await asyncio.sleep(wait)  # the back-off between probes
            try:
                async with asyncio.timeout(outage.most):
                    await self._probes[outage.what]()
            except Exception as error:  # noqa: BLE001 - any failure: still away
                wait = outage.failed(error)
                continue
            outage.recovered()
            return

    async def close(self) -> None:
        for task in self._watches.values():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._watches.clear()


async def unless_stopped(stop: asyncio.Event, seconds: float) -> None:
    """Wait ``seconds``, or less if ``stop`` is set meanwhile."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)
