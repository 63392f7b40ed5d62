"""Every shell block of the README runs as written, against a real server.

Each ``sh`` block carries a marker (``<!-- docs-test: ... -->``) that says how:

- ``run``: against the test server, which stands in for ``make run`` (``localhost:8000``
  is its address, and a worker runs beside it);
- ``run on a port of its own``: the block starts servers itself; it gets a free port and
  the test Redis, and everything it left running is stopped afterwards;
- ``not run: <why>``: only for what a test cannot do here (CI itself, Docker).

A block runs in bash with ``set -euo pipefail``, in a scratch folder holding ``examples/``
(as a checkout would), with the virtualenv's ``wizard-arena`` first on the ``PATH``.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.project.readme_blocks import Block, readme_blocks
from tests.service.arena_client import REPO, Api, free_port

# (a block that shows a file of the repository, `docs-test: file PATH`, is that file:
# tests/project/test_readme.py checks it, and the tests of what the file is run it)
SHELL_BLOCKS = [b for b in readme_blocks("sh") if not (b.marker or "").startswith("file ")]
NOT_RUN = [b for b in SHELL_BLOCKS if (b.marker or "").startswith("not run: ")]
RUN = [b for b in SHELL_BLOCKS if b not in NOT_RUN]


def test_every_shell_block_says_how_it_is_run():
    assert len(SHELL_BLOCKS) >= 5
    for block in SHELL_BLOCKS:
        assert block.marker in ("run", "run on a port of its own") or block in NOT_RUN, (
            f"{block} needs a marker: <!-- docs-test: run --> (or a reason it cannot be run)"
        )
    # only CI itself and Docker are out of a test's reach
    assert len(NOT_RUN) == 3 and all(len(b.marker or "") > len("not run: ") + 10 for b in NOT_RUN)


@pytest.fixture(scope="module")
def worker(start_worker: Any) -> Iterator[Any]:
    """This module's own worker, stopped after it: left running, it would take the house
    matches of modules that run later on the same Redis (tests/service/test_house_play.py)."""
    process = start_worker()
    yield process
    process.stop()


def run_block(block: Block, tmp_path: Path, port: int, redis_url: str) -> str:
    for tool in ("curl", "jq"):
        if re.search(rf"\b{tool}\b", block.code) and shutil.which(tool) is None:
            pytest.skip(f"{block} uses {tool}, which this machine lacks")
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    script = block.code.replace("redis://localhost:6379/0", redis_url).replace("localhost:8000", f"127.0.0.1:{port}")
    script = script.replace("--port 8000", f"--port {port}")
    bin_dir = str(Path(sys.executable).parent)
    env = {
        **os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(REPO),
        "WIZARD_ARENA_URL": "", "WIZARD_ARENA_TOKEN": "",
    }
    log = tmp_path / "block.log"
    with log.open("wb") as out:  # a file, not a pipe: what the block leaves running keeps it open
        process = subprocess.Popen(
            ["bash", "-c", "set -euo pipefail\n" + script], cwd=tmp_path, env=env,
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
        try:
            process.wait(timeout=180)
        finally:
            try:  # whatever the block left running in the background
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    output = log.read_text(errors="replace")
    assert process.returncode == 0, f"{block} failed (exit {process.returncode}):\n{output}"
    return output


@pytest.mark.parametrize("block", RUN, ids=lambda b: f"line-{b.line}")
def test_readme_shell_block_runs(block: Block, api: Api, worker: Any, redis_url: str, tmp_path: Path) -> None:
    port = api.port if block.marker == "run" else free_port()
    output = run_block(block, tmp_path, port, redis_url)
    # no GraphQL error on the way, but those the block shows on purpose (and names)
    codes = re.findall(r'"errors":\[.*?"code":"(\w+)"', output)
    assert all(code in block.code for code in codes), output
