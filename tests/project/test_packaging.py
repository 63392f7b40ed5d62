"""What `pip install wizard-arena` gives a bot author (the engine, the SDK and the command,
without the service's packages), and bounds in pyproject.toml that the tests really run at."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

#: a Python started with the service's packages made unimportable, as in a bot author's install
WITHOUT_SERVER = textwrap.dedent("""
    import importlib.abc, sys
    from wizard_arena.cli import SERVER_PACKAGES

    class NotInstalled(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in SERVER_PACKAGES:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NotInstalled())
""")


def run_without_server(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_SERVER + textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True,
        timeout=120,
    )


def test_the_engine_the_sdk_and_local_tournaments_need_no_server_package():
    result = run_without_server("""
        import sdk, sdk.runner, sdk.client, sdk.local_tournament, sdk.replay, sdk.watch, wizard, ranking, contract
        from wizard_arena.cli import main
        main(["tournament", "run", "--bots", "heuristic,random", "--matches", "4", "--players", "4", "--json"])
    """)
    assert result.returncode == 0, result.stderr
    assert '"heuristic"' in result.stdout


def test_a_service_command_without_the_server_packages_says_what_to_install():
    result = run_without_server("""
        from wizard_arena.cli import main
        main(["serve"])
    """)
    assert result.returncode == 1
    assert "pip install 'wizard-arena[server]'" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_the_lowest_constraints_pin_every_bound_of_pyproject():
    """`make` installs with requirements/lowest.txt: each direct dependency at its lower bound."""
    declared = [*PYPROJECT["project"]["dependencies"], *(d for group in PYPROJECT["project"]["optional-dependencies"].values() for d in group)]
    bounds = {}
    for requirement in declared:
        match = re.match(r"([A-Za-z0-9_.-]+)(\[[^\]]*\])?\s*>=\s*([^,\s]+)", requirement)
        assert match, f"{requirement!r} has no lower bound"
        bounds[match.group(1).lower()] = match.group(3)
    pinned = {}
    for line in (ROOT / "requirements" / "lowest.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pinned[name.lower()] = version
    assert pinned == bounds
