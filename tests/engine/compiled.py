"""The compiled engine as ``pip install`` builds it, in a directory of its own:
``python -m tests.engine.compiled DIR`` (``make compiled``) or :func:`build_compiled_engine`.

pip builds the project's wheel (its build environment brings setuptools and mypy, whose mypyc
``setup.py`` runs), and the wheel is unpacked into the directory: put the directory first on
``PYTHONPATH`` to load it (``wizard.COMPILED`` is then True; ``WIZARD_PURE_PYTHON=1`` loads
the same directory's ``.py`` files).  The project's own tree stays pure Python (an editable
install is never compiled), so an edit of a ``.py`` is never hidden by a stale extension.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: what a wheel is built from (as the Dockerfile copies it)
SOURCES = ("pyproject.toml", "setup.py", "README.md", "wizard", "ranking", "contract", "sdk", "service", "worker",
           "bench", "wizard_arena")
#: the modules setup.py compiles, and the library they share
COMPILED = ("wizard/tricks", "wizard/shuffle", "wizard/playout", "wizard/sampling", "wizard/search", "wizard__mypyc")


def build_compiled_engine(directory: Path) -> Path:
    """Build the project's wheel with pip and unpack it into ``directory`` (emptied first);
    raises with pip's output when the wheel holds no compiled engine."""
    if directory.exists():
        shutil.rmtree(directory)
    with tempfile.TemporaryDirectory(prefix="wizard-wheel-") as temporary:
        source, wheels = Path(temporary) / "source", Path(temporary) / "wheels"
        ignore = shutil.ignore_patterns("__pycache__", "*.so", "node_modules")
        for name in SOURCES:
            if (ROOT / name).is_dir():
                shutil.copytree(ROOT / name, source / name, ignore=ignore)
            else:
                source.mkdir(parents=True, exist_ok=True)
                shutil.copy(ROOT / name, source / name)
        result = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(wheels), str(source)],
            capture_output=True, text=True, timeout=900,
        )
        built = list(wheels.glob("*.whl"))
        if result.returncode != 0 or not built:
            raise RuntimeError(f"pip could not build the wheel:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
        with zipfile.ZipFile(built[0]) as wheel:
            names = wheel.namelist()
            missing = [m for m in COMPILED if not any(n.startswith(m + ".") and n.endswith(".so") for n in names)]
            if missing:
                raise RuntimeError(f"the wheel holds no compiled {missing} (pip's output:\n{result.stderr[-4000:]})")
            wheel.extractall(directory)
    return directory


if __name__ == "__main__":
    print(build_compiled_engine(Path(sys.argv[1]).resolve()))
