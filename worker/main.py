"""``wizard-arena worker``: an RQ worker with its scheduler, plus the clock (deadlines,
settlements, tournaments) and beside it on the same loop, the webhook dispatcher
(``worker.webhooks``).

The clock runs on its own asyncio loop in a thread (it shares the async domain code with
the API); RQ's worker keeps the main thread, where it handles signals."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

from redis import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from rq import Queue, Worker, worker_registration
from rq.exceptions import StopRequested

from service.domain.services import Services, StoppedWhileStarting
from service.health import host_name
from service.outage import Outage
from service.settings import Settings
from service.store.keys import CLOCK_HEARTBEATS
from service.store.redis_client import open_sync, queue_url
from worker.clock import JOB_QUEUE, JobQueue, run_clock
from worker.webhooks import Dispatcher

log = logging.getLogger("wizard_arena.worker")

QUEUES = (JOB_QUEUE,)
#: how often a worker makes sure RQ's Redis still lists it (see keep_registered)
REGISTRATION_CHECK_SECONDS = 5.0


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
        try:
            services = await Services.start(self.settings, role="worker", stopping=self._stop_event)
        except StoppedWhileStarting:
            return
        queue = JobQueue(jobs_url(self.settings))
        dispatcher = asyncio.create_task(Dispatcher(services).run(self._stop_event))
        self.ready.set()
        try:
            await run_clock(services, queue, self._stop_event)
        finally:
            self._stop_event.set()
            await asyncio.gather(dispatcher, return_exceptions=True)
            queue.close()
            await services.close()

    def stop(self) -> None:
        if self._loop is not None and self._stop_event is not None:
            self._loop.call_soon_threadsafe(self._stop_event.set)
        self.join(10)


def jobs_url(settings: Settings) -> str:
    """The Redis of RQ's job queue (``ARENA_QUEUE_URL``; by default ``REDIS_URL`` when that is
    one server)."""
    assert settings.redis_url, "REDIS_URL is checked before the worker starts"
    return queue_url(settings.redis_url, settings.queue_url)


def run_worker(settings: Settings, burst: bool = False) -> None:
    clock = ClockThread(settings)
    clock.start()
    clock.ready.wait(10)
    connection = Redis.from_url(jobs_url(settings))
    try:
        work_until_told_to_stop(connection, burst)
    finally:
        clock.stop()
        connection.close()


def keep_registered(worker: Worker) -> bool:
    """Register ``worker`` with RQ again if RQ's Redis has forgotten it; whether it had.

    RQ registers a worker once, as it starts. The queue's Redis keeps nothing the service
    needs (``ARENA_QUEUE_URL``: it may restart empty), but after such a restart the worker
    would run jobs unlisted, and ``worker --check`` (which asks RQ for this host's worker)
    would fail until the worker restarted."""
    if worker.birth_date is None or worker.connection.sismember(worker.redis_workers_keys, worker.key):
        return False
    with worker.connection.pipeline() as pipe:
        pipe.hset(worker.key, mapping=worker.serialize())
        worker_registration.register(worker, pipe)
        pipe.expire(worker.key, worker.worker_ttl + 60)
        pipe.execute()
    log.warning("RQ's Redis had forgotten this worker (restarted empty?): registered it again")
    return True


def _keep_registered_until(worker: Worker, stop: threading.Event) -> None:
    while not stop.wait(REGISTRATION_CHECK_SECONDS):
        try:
            keep_registered(worker)
        except RedisError:  # the queue's Redis away: RQ's own loop says so; asked again next time
            pass


class ArenaWorker(Worker):
    """RQ's worker, whose start and end outlast Redis going away in the middle of them, and
    which says whether it stopped because it was told to (:attr:`told_to_stop`)."""

    told_to_stop = False

    def bootstrap(self, *args: Any, **kwargs: Any) -> None:
        """RQ's start (its birth registered, its channel followed, its state set), again with
        back-off while Redis is away: RQ makes these calls before its loop, which is where it
        handles an outage, so a Redis restart during a worker's start killed the worker with a
        traceback. A start cut short may have registered the birth (a second one is refused
        while the first lives: it goes first) and started the channel's thread (stopped: the
        next start makes its own)."""
        outage = Outage("Redis", None)  # the clock, in this process, says the outage in the log
        while True:
            try:
                if outage.down:
                    self.connection.delete(self.key)
                super().bootstrap(*args, **kwargs)
                return
            except (RedisConnectionError, RedisTimeoutError) as error:
                self._stop_channel()
                time.sleep(outage.failed(error))

    def teardown(self) -> None:
        """RQ's end, which registers the death: with Redis away, the worker's key expires by
        itself (RQ's registry drops it then) and its channel's thread is stopped."""
        try:
            super().teardown()
        except (RedisConnectionError, RedisTimeoutError):
            self._stop_channel()

    def request_stop(self, signum: Any, frame: Any) -> None:
        self.told_to_stop = True
        super().request_stop(signum, frame)

    def _stop_channel(self) -> None:
        if self.pubsub_thread is not None:  # (it closes its connection as it ends)
            self.pubsub_thread.stop()
        elif self.pubsub is not None:
            self.pubsub.close()
        self.pubsub, self.pubsub_thread = None, None


class _OutageInOneLine(logging.Filter):
    """RQ's loop quits on an error outside its wait for jobs, an outage too, and logs it with
    its traceback: an outage (the clock says it, once) is one line here, without it."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, RedisConnectionError | RedisTimeoutError):
            record.msg, record.args = f"{record.getMessage()} ({type(error).__name__}: {error})", ()
            record.exc_info, record.exc_text = None, None
        return True


def work_until_told_to_stop(connection: Redis, burst: bool = False) -> None:
    """RQ's worker at work until it is told to stop (SIGTERM, SIGINT), or with ``burst``, until
    the queue is empty. RQ's loop handles an outage only while it waits for a job: one that
    comes during any of its other calls (its state set, a heartbeat, a job's result stored)
    ends the loop, and the worker with it. Here a new worker starts in its place, once Redis
    answers (a second after the last one ended, then with back-off while they keep ending)."""
    rq_log = logging.getLogger("rq.worker")
    one_line = _OutageInOneLine()
    rq_log.addFilter(one_line)
    wait = 0.0
    try:
        while True:
            worker = _rq_worker(connection)
            registered = threading.Event()  # set: stop keeping the registration
            threading.Thread(target=_keep_registered_until, args=(worker, registered), name="rq-registration",
                             daemon=True).start()
            began = time.monotonic()
            try:
                # No RQ scheduler: no job is queued for later (the clock queues work when it is
                # due) nor retried after an interval, and its process died with a traceback
                # whenever Redis went away.
                worker.work(with_scheduler=False, burst=burst, logging_level="INFO")
            finally:
                registered.set()
            if burst or worker.told_to_stop:
                return
            wait = 1.0 if time.monotonic() - began > 60 else min(max(wait * 2, 1.0), 30.0)
            log.warning("RQ's worker %s stopped on an error (said above); another starts in %g s", worker.name, wait)
            time.sleep(wait)
    except StopRequested:  # told to stop between two workers (by the last one's signal handlers)
        return
    finally:
        rq_log.removeFilter(one_line)


def _rq_worker(connection: Redis) -> ArenaWorker:
    """The RQ worker, made once Redis answers: RQ registers it in Redis as it is made, so a
    worker started while Redis is away (restarting, say) would die; it waits with back-off
    instead (the clock, in this process, says the outage in the log)."""
    outage = Outage("Redis", None)
    while True:
        try:
            return ArenaWorker([Queue(name, connection=connection) for name in QUEUES], connection=connection)
        except (RedisConnectionError, RedisTimeoutError) as error:
            time.sleep(outage.failed(error))


def check_worker(settings: Settings) -> list[str]:
    """What is wrong with this host's worker (``wizard-arena worker --check``; empty: healthy):
    its RQ worker must be registered in Redis and its clock must have gone round within
    ``ARENA_CLOCK_STALE_SECONDS`` (a clock that died leaves the RQ worker running)."""
    host = host_name()
    connection = Redis.from_url(jobs_url(settings), socket_timeout=3, socket_connect_timeout=3)
    store = open_sync(settings.redis_url, socket_timeout=3, socket_connect_timeout=3)  # type: ignore[arg-type]
    try:
        problems = []
        if not any(worker.hostname == host for worker in Worker.all(connection=connection)):
            problems.append(f"no RQ worker of host {host} is registered in Redis")
        beat = store.hget(CLOCK_HEARTBEATS, host)
        if beat is None:
            problems.append(f"the clock of host {host} has never beaten")
        else:
            age = time.time() - int(beat) / 1000
            if age > settings.clock_stale_seconds:
                problems.append(f"the clock of host {host} last went round {age:.1f} s ago (stale after "
                                f"{settings.clock_stale_seconds:g} s)")
        return problems
    except Exception as error:  # noqa: BLE001 - any failure means "not healthy"
        return [f"Redis not reached: {error}"]
    finally:
        connection.close()
        store.close()
