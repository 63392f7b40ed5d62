"""`make setup` installs requirements/lock.txt first (hashes checked, as the image does), then
the project with the dev tools under requirements/lowest.txt's constraints: the tests run the
server's dependency tree that ships. That holds only while the two files agree on every
package both pin (else pip stops, or moves a locked package)."""

from __future__ import annotations

from pathlib import Path

from packaging.utils import canonicalize_name

from tests.project.test_lock import locked

ROOT = Path(__file__).resolve().parents[2]


def lowest() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements" / "lowest.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version.strip()
    return pins


def test_the_lowest_constraints_agree_with_the_lock() -> None:
    lock = locked()
    differ = {name: (version, lock[name][0]) for name, version in lowest().items()
              if name in lock and lock[name][0] != version}
    assert not differ, f"requirements/lowest.txt and requirements/lock.txt disagree (lowest, lock): {differ}"


def test_the_dev_venv_installs_the_lock_before_the_project() -> None:
    makefile = (ROOT / "Makefile").read_text()
    target = makefile.split("$(BIN)/wizard-arena:", 1)[1].split("\n\n", 1)[0]
    prerequisites, *recipe = target.splitlines()
    assert "requirements/lock.txt" in prerequisites
    installs = [line for line in recipe if "pip install" in line and "--upgrade pip" not in line]
    assert "--require-hashes -r requirements/lock.txt" in installs[0], installs
    assert "-c requirements/lowest.txt" in installs[-1] and len(installs) == 2, installs
