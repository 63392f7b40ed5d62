"""strawberry's schema extension hooks, found once per extension type rather than per request.

For every request, strawberry looks up each extension's hook for each of the request's four
stages (operation, parsing, validation, execution): an attribute lookup, an ``inspect`` check of
the hook's kind and, for a generator hook, a new ``contextlib.contextmanager`` wrapper (with
``functools.update_wrapper``) around the hook bound to that request's extension. With the
service's three extensions that is twelve lookups and four wrappers per request: about a fifth
of executing ``{ __typename }``. What a type's hook is never changes, so it is found once per
(extension type, stage); a request's hook is then that hook given its own extension instance,
as strawberry would have called it.

:class:`ArenaSchema` (``schema.py``) runs its extensions through :class:`HooksRunner`.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable
from typing import Any

from strawberry.extensions import SchemaExtension
from strawberry.extensions.context import (
    ExecutingContextManager,
    ExtensionContextManagerBase,
    OperationContextManager,
    ParsingContextManager,
    ValidationContextManager,
    WrappedHook,
)
from strawberry.extensions.runner import SchemaExtensionsRunner

#: a stage's hook of an extension type, given the request's extension (None: the type has no
#: hook for that stage; _PLAIN: a plain function, which strawberry's own lookup wraps)
_Bind = Callable[[SchemaExtension], WrappedHook] | None
_PLAIN: Any = object()
_binds: dict[tuple[type[SchemaExtension], str], _Bind] = {}


class _HooksFoundOnce(ExtensionContextManagerBase):
    __slots__ = ()

    def get_hook(self, extension: SchemaExtension) -> WrappedHook | None:
        key = (type(extension), self.HOOK_NAME)
        try:
            bind = _binds[key]
        except KeyError:
            bind = _binds[key] = self._bind(type(extension))
        if bind is _PLAIN:
            return super().get_hook(extension)
        return None if bind is None else bind(extension)

    def _bind(self, kind: type[SchemaExtension]) -> _Bind:
        hook = getattr(kind, self.HOOK_NAME)
        if hook is self.default_hook:
            return None
        if inspect.isgeneratorfunction(hook):
            sync_factory = contextlib.contextmanager(hook)
            return lambda extension: WrappedHook(extension, functools.partial(sync_factory, extension), False)
        if inspect.isasyncgenfunction(hook):
            async_factory = contextlib.asynccontextmanager(hook)
            return lambda extension: WrappedHook(extension, functools.partial(async_factory, extension), True)
        return _PLAIN  # (strawberry checks and wraps it, or says what is wrong with it)


class _Operation(_HooksFoundOnce, OperationContextManager):
    __slots__ = ()


class _Validation(_HooksFoundOnce, ValidationContextManager):
    __slots__ = ()


class _Parsing(_HooksFoundOnce, ParsingContextManager):
    __slots__ = ()


class _Executing(_HooksFoundOnce, ExecutingContextManager):
    __slots__ = ()


class HooksRunner(SchemaExtensionsRunner):
    """strawberry's runner of a request's extensions, its hooks found once per type."""

    def operation(self) -> OperationContextManager:
        return _Operation(self.extensions)

    def validation(self) -> ValidationContextManager:
        return _Validation(self.extensions)

    def parsing(self) -> ParsingContextManager:
        return _Parsing(self.extensions)

    def executing(self) -> ExecutingContextManager:
        return _Executing(self.extensions)


__all__ = ["HooksRunner"]
