"""The compiled engine (mypyc, ``setup.py``) against the pure-Python one: built by pip once
per session into a directory of its own (tests/engine/compiled.py), it must play every
configuration exactly as the pure engine does, and the SEARCH house bot with a node budget
must choose the same moves in both (tests/engine/differential.py), and the
choice of build must work as the README says (``wizard.COMPILED``, ``WIZARD_PURE_PYTHON``,
the fallback when a compiled module cannot load)."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.engine.compiled import ROOT, build_compiled_engine

HOT_MODULES = ("wizard.tricks", "wizard.shuffle", "wizard.playout", "wizard.sampling", "wizard.search")


@pytest.fixture(scope="session")
def compiled_engine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The compiled engine's directory, built once for every xdist worker (under a lock)."""
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler: the compiled engine cannot be built here (apt-get install gcc)")
    shared = tmp_path_factory.getbasetemp().parent
    directory = shared / "compiled-engine"
    with open(shared / "compiled-engine.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (directory / "built").exists():
            build_compiled_engine(directory)
            (directory / "built").touch()
    return directory


def _python(directory: Path, code_or_module: list[str], pure: bool = False) -> str:
    """Run Python in ``directory`` (its ``wizard`` first on the path, this repository's
    ``tests`` after it), with or without WIZARD_PURE_PYTHON=1, and return its output."""
    env = {k: v for k, v in os.environ.items() if k not in ("WIZARD_PURE_PYTHON", "PYTHONPATH")}
    env["PYTHONPATH"] = str(ROOT)
    if pure:
        env["WIZARD_PURE_PYTHON"] = "1"
    result = subprocess.run(
        [sys.executable, *code_or_module], cwd=directory, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


WHICH_FILES = [
    "-c",
    "import importlib, json, wizard; print(json.dumps([wizard.COMPILED]"
    f" + [importlib.import_module(m).__file__.rsplit('/', 1)[1] for m in {HOT_MODULES!r}]))",
]


def test_the_compiled_and_the_pure_engine_play_every_configuration_alike(compiled_engine: Path) -> None:
    compiled = _python(compiled_engine, ["-m", "tests.engine.differential"]).splitlines()
    pure = _python(compiled_engine, ["-m", "tests.engine.differential"], pure=True).splitlines()
    assert json.loads(compiled[0]) == {"compiled": True}
    assert json.loads(pure[0]) == {"compiled": False}
    assert len(compiled) == len(pure) > 200
    searched = 0
    for line_c, line_p in zip(compiled[1:], pure[1:], strict=True):
        c, p = json.loads(line_c), json.loads(line_p)
        assert c["match"] == p["match"]
        if c["match"].endswith("/search"):
            searched += len(c["digests"])
        first = next((i for i, (a, b) in enumerate(zip(c["digests"], p["digests"], strict=False)) if a != b), None)
        assert first is None and len(c["digests"]) == len(p["digests"]), (
            f"{c['match']}: the builds differ after move {first} (or in length)"
        )
    assert searched > 500  # (every configuration's searches, of bids, trumps and cards)


def test_the_hot_modules_are_compiled_and_the_environment_can_force_pure_python(compiled_engine: Path) -> None:
    compiled_flag, *files = json.loads(_python(compiled_engine, WHICH_FILES))
    assert compiled_flag is True and all(f.endswith(".so") for f in files), files
    compiled_flag, *files = json.loads(_python(compiled_engine, WHICH_FILES, pure=True))
    assert compiled_flag is False and all(f.endswith(".py") for f in files), files


def test_each_build_takes_its_own_forks(compiled_engine: Path) -> None:
    """Where the fastest code differs between the builds, the hot modules ask
    ``MYPYC_COMPILED``: True in the compiled build and False in the pure one, so that the
    differential test above plays each build's own code, not one of them twice."""
    probe = ["-c", "import wizard.shuffle as s; print(s.MYPYC_COMPILED)"]
    assert _python(compiled_engine, probe).strip() == "True"
    assert _python(compiled_engine, probe, pure=True).strip() == "False"


def test_a_compiled_engine_that_cannot_load_falls_back_to_pure_python(compiled_engine: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(compiled_engine, broken, ignore=shutil.ignore_patterns("wizard__mypyc*"))
    compiled_flag, *files = json.loads(_python(broken, WHICH_FILES))
    assert compiled_flag is False and all(f.endswith(".py") for f in files), files


def test_the_source_tree_stays_pure_python() -> None:
    """No extension module beside the sources (an editable install does not compile): one
    would hide every later edit of its ``.py``."""
    import wizard

    assert not list((ROOT / "wizard").glob("*.so"))
    assert wizard.COMPILED is False
