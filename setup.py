"""The compiled engine: pyproject.toml holds the project; this file only adds the engine's
hot modules compiled by mypyc (from the same typed Python) when they can be built.

- ``COMPILED_MODULES`` are the modules a playout and the SEARCH house bot spend their time
  in, with no runtime checks of their callers' types (see README, "The engine for bot authors": which and why);
  the others stay Python, also in a compiled install.
- No compiler, no mypyc, or a failing build: a warning, and the pure-Python package
  (``wizard.COMPILED`` is False). ``WIZARD_PURE_PYTHON=1`` at build time skips compiling.
- An editable install (``pip install -e``) is never compiled: setuptools would copy the
  extensions next to their sources, where they would hide every later edit of a ``.py``.
  ``make compiled`` builds them into a directory of their own.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

#: the modules mypyc compiles, as one group (one shared library, ``wizard__mypyc``)
COMPILED_MODULES = [
    "wizard/tricks.py", "wizard/shuffle.py", "wizard/playout.py", "wizard/sampling.py", "wizard/search.py",
]


class OptionalBuildExt(build_ext):
    """build_ext that falls back to the pure-Python package when the C build fails."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as e:  # noqa: BLE001 (a compiler missing or failing, whatever it raises: Python is the fallback)
            warnings.warn(f"the compiled engine could not be built ({e}); installing the pure-Python one", stacklevel=1)
            for output in self.get_outputs():
                if os.path.exists(output):
                    os.remove(output)
            self.extensions = []


def compiled_extensions() -> list[Any]:
    editable = any(command in sys.argv for command in ("editable_wheel", "develop"))
    if editable or os.environ.get("WIZARD_PURE_PYTHON", "") not in ("", "0"):
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        warnings.warn("mypyc is not installed: installing the pure-Python engine", stacklevel=1)
        return []
    try:
        # (--config-file=: not pyproject.toml's [tool.mypy], whose plugin, strawberry's, a
        # build environment does not have; the engine needs no setting of it)
        return mypycify(["--config-file=", *COMPILED_MODULES], opt_level="3", group_name="wizard")
    except BaseException as e:  # noqa: BLE001 (mypyc exits on a type error: Python is the fallback)
        warnings.warn(f"mypyc could not compile the engine ({e!r}); installing the pure-Python one", stacklevel=1)
        return []


if __name__ == "__main__":
    setup(ext_modules=compiled_extensions(), cmdclass={"build_ext": OptionalBuildExt})
