"""``wizard-arena worker``: an RQ worker with its scheduler, plus the clock (deadlines,
settlements, tournaments).

The clock runs on its own asyncio loop in a thread (it shares the async domain code with
the API); RQ's worker keeps the main thread, where it handles signals."""

from __future__ import annotations

import asyncio
import logging
import threading

from redis import Redis
from rq import Queue, Worker

from service.domain.services import Services
from service.settings import Settings
from worker.clock import JOB_QUEUE, JobQueue, run_clock

log = logging.getLogger("wizard_arena.worker")

QUEUES = (JOB_QUEUE,)


class ClockThread(threading.Thread):
    """The clock (deadlines, settlements, tournaments) on its own asyncio loop."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(name="clock", daemon=True)
        self.settings = settings
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self.ready = threading.Event()

    def run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop_event = asyncio.Event()
        services = Services.open(self.settings, role="worker")
        queue = JobQueue(self.settings.redis_url)  # type: ignore[arg-type]
        self.ready.set()
        try:
            await run_clock(services, queue, self._stop_event)
        finally:
            queue.close()
            await services.close()

    def stop(self) -> None:
        if self._loop is not None and self._stop_event is not None:
            self._loop.call_soon_threadsafe(self._stop_event.set)
        self.join(10)


def run_worker(settings: Settings, burst: bool = False) -> None:
    clock = ClockThread(settings)
    clock.start()
    clock.ready.wait(10)
    connection = Redis.from_url(settings.redis_url)
    try:
        worker = Worker([Queue(name, connection=connection) for name in QUEUES], connection=connection)
        worker.work(with_scheduler=True, burst=burst, logging_level="INFO")
    finally:
        clock.stop()
        connection.close()
