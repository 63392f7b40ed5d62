"""requirements/lock.txt, what the image and `make run` install with ``--require-hashes``:
every package running the service needs (the direct dependencies of pyproject.toml and the
server extra, and theirs, as installed metadata names them) is pinned there, inside the
bounds pyproject.toml declares, with its hashes."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements" / "lock.txt"


def locked() -> dict[str, tuple[str, list[str]]]:
    """name: (version, hashes) of every entry of the lock."""
    entries: dict[str, tuple[str, list[str]]] = {}
    text = re.sub(r"\\\n\s*", " ", LOCK.read_text())
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        pin, *options = line.split()
        name, version = pin.split("==")
        hashes = [option.removeprefix("--hash=") for option in options if option.startswith("--hash=")]
        entries[canonicalize_name(name)] = (version, hashes)
    return entries


def runtime_requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in [*project["dependencies"], *project["optional-dependencies"]["server"]]]


def test_every_entry_is_pinned_with_sha256_hashes() -> None:
    entries = locked()
    assert entries, "the lock is empty"
    for name, (version, hashes) in entries.items():
        assert re.fullmatch(r"[\w.+!-]+", version), f"{name}=={version}"
        assert hashes and all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for h in hashes), f"{name} has no sha256 hash"


def test_every_direct_dependency_is_locked_inside_its_bounds() -> None:
    entries = locked()
    for requirement in runtime_requirements():
        name = canonicalize_name(requirement.name)
        assert name in entries, f"{requirement} is not in the lock: run `make lock`"
        assert requirement.specifier.contains(entries[name][0], prereleases=True), (
            f"the lock has {name}=={entries[name][0]}, outside {requirement}: run `make lock`"
        )


def test_every_dependency_of_theirs_is_locked_too() -> None:
    """The dependencies' own (with their extras, on this platform), as their installed
    metadata names them: pip --require-hashes refuses to install a package the lock lacks."""
    entries = locked()
    pending = [(r, "pyproject.toml") for r in runtime_requirements()]
    seen: set[str] = set()
    while pending:
        requirement, wanted_by = pending.pop()
        name = canonicalize_name(requirement.name)
        if name in seen:
            continue
        seen.add(name)
        assert name in entries, f"{name} (wanted by {wanted_by}) is not in the lock: run `make lock`"
        try:
            requires = distribution(name).requires or []
        except PackageNotFoundError:
            continue
        for line in requires:
            needed = Requirement(line)
            if needed.marker is None or any(
                needed.marker.evaluate({"extra": extra}) for extra in (requirement.extras or {""})
            ):
                pending.append((needed, name))
