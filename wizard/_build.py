"""Which build of the engine's hot modules is loaded: the ones mypyc compiled, or the
pure-Python ones (:data:`COMPILED`).  ``wizard/__init__.py`` imports this module first.

A compiled install (``pip install`` with a C compiler, see ``setup.py``) has an extension
module beside the ``.py`` of :mod:`wizard.tricks`, :mod:`wizard.shuffle`,
:mod:`wizard.playout`, :mod:`wizard.sampling` and :mod:`wizard.search`, which Python's import
prefers.  ``WIZARD_PURE_PYTHON=1`` in the
environment, before the first import of :mod:`wizard`, loads the ``.py`` files all the same
(for a comparison, or to step through the engine in a debugger); so does a compiled module
that cannot be loaded (built for another Python, or a part of it missing).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import EXTENSION_SUFFIXES, ModuleSpec
from importlib.util import spec_from_file_location
from types import ModuleType

_PACKAGE = __name__.rpartition(".")[0]
_DIRECTORY = os.path.dirname(os.path.abspath(__file__))


class _SourceFinder(MetaPathFinder):
    """Finds the package's modules as their ``.py`` files, ahead of any compiled one."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        package, _, module = fullname.rpartition(".")
        source = os.path.join(_DIRECTORY, module + ".py")
        if package != _PACKAGE or not os.path.isfile(source):
            return None
        return spec_from_file_location(fullname, source)


def _load_pure_python() -> None:
    """From now on, the package's modules load from their ``.py`` files (any already loaded
    but this one are dropped, to load again)."""
    for name in [m for m in sys.modules if m.startswith(_PACKAGE + ".") and m != __name__]:
        del sys.modules[name]
    sys.meta_path.insert(0, _SourceFinder())


def _hot_module() -> ModuleType:
    forced = os.environ.get("WIZARD_PURE_PYTHON", "") not in ("", "0")
    if forced:
        _load_pure_python()
    try:
        from wizard import playout
    except ImportError:
        if forced:
            raise
        _load_pure_python()  # (the compiled modules are there but do not load)
        from wizard import playout
    return playout


#: whether the engine's hot modules are the ones mypyc compiled (False: pure Python)
COMPILED: bool = (_hot_module().__file__ or "").endswith(tuple(EXTENSION_SUFFIXES))
