"""The node clients the service tests run (tests/clients/*.mjs), on the packages that
package-lock.json pins: installed with `npm ci` into tests/clients/node_modules/ (ignored by
git) once, and reused for as long as the lock file is unchanged."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

CLIENTS = Path(__file__).resolve().parent


def installed(folder: Path = CLIENTS) -> Path:
    """``folder``'s node_modules, holding what its package-lock.json pins (``npm ci`` when it
    does not yet). Skips the test on a machine without node and npm."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are needed to run the JavaScript clients (node 20 or later)")
    lock = hashlib.sha256((folder / "package-lock.json").read_bytes()).hexdigest()
    stamp = folder / "node_modules" / ".installed-from-lock"  # npm ci empties node_modules first
    if not stamp.is_file() or stamp.read_text() != lock:
        done = subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund", "--prefer-offline"], cwd=folder,
            capture_output=True, text=True, timeout=600,
        )
        assert done.returncode == 0, f"npm ci in {folder} failed:\n{done.stdout}\n{done.stderr}"
        stamp.write_text(lock)
    return folder / "node_modules"


def run(script: str, *args: str, timeout: float = 120) -> list[Any]:
    """Runs tests/clients/``script`` with node; the JSON lines it printed."""
    installed()
    done = subprocess.run(["node", str(CLIENTS / script), *args], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"node {script} failed (exit {done.returncode}):\n{done.stdout}\n{done.stderr}"
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
