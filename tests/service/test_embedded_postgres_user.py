"""The embedded PostgreSQL's system user is made once, whoever asks for it at the same time:
on a fresh machine the test tiers' two workers each start a server at once, and each made the
user; the second ``useradd`` failed (the name taken since it looked), and with it every test
of that worker that needed a database."""

from __future__ import annotations

import multiprocessing
import os
import secrets
import subprocess
from typing import Any

import pytest

from service.store.embedded_postgres import system_user

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="only root makes the server's system user")


def _made(name: str, start: Any, answers: Any) -> None:
    start.wait()
    try:
        answers.put(system_user(name).pw_uid)
    except Exception as error:  # noqa: BLE001 - reported to the test
        answers.put(repr(error))


def test_processes_asking_at_once_for_a_user_not_there_yet_all_get_the_same_one() -> None:
    name = f"wza{secrets.token_hex(4)}"  # a user of this test's own, removed at its end
    context = multiprocessing.get_context("spawn")
    start, answers = context.Barrier(6), context.Queue()
    processes = [context.Process(target=_made, args=(name, start, answers)) for _ in range(6)]
    try:
        for process in processes:
            process.start()
        got = [answers.get(timeout=60) for _ in processes]
        assert all(isinstance(uid, int) for uid in got), got
        assert len(set(got)) == 1
    finally:
        for process in processes:
            process.join(30)
        subprocess.run(["userdel", name], capture_output=True)
