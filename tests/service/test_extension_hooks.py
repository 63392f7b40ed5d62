"""The schema runs its extensions' hooks found once per extension type (``extension_hooks``):
each request's hooks must still be its own extension's, every kind strawberry allows (a
generator, an async generator, a plain function, a coroutine function), in strawberry's order."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import strawberry
from strawberry.extensions import SchemaExtension

from service.api.graphql.schema import ArenaSchema


@strawberry.type
class Query:
    @strawberry.field
    def answer(self) -> int:
        return 42


def test_each_request_runs_its_own_extensions_hooks_of_every_kind_in_order() -> None:
    seen: list[tuple[str, SchemaExtension]] = []

    class Recorded(SchemaExtension):
        def on_operation(self) -> Iterator[None]:
            seen.append(("operation", self))
            yield
            seen.append(("operation ends", self))

        async def on_parse(self) -> AsyncIterator[None]:
            seen.append(("parse", self))
            yield
            seen.append(("parse ends", self))

        def on_validate(self) -> None:  # type: ignore[override]
            seen.append(("validate", self))

        async def on_execute(self) -> None:  # type: ignore[override]
            seen.append(("execute", self))

    class WithoutHooks(SchemaExtension):
        pass

    schema = ArenaSchema(query=Query, extensions=[Recorded, WithoutHooks])

    async def two_requests() -> list[object]:
        return [(await schema.execute("{ answer }")).data for _ in range(2)]

    assert asyncio.run(two_requests()) == [{"answer": 42}] * 2
    stages = [stage for stage, _ in seen]
    assert stages == ["operation", "parse", "parse ends", "validate", "execute", "operation ends"] * 2
    first, second = {id(e) for _, e in seen[:6]}, {id(e) for _, e in seen[6:]}
    assert len(first) == len(second) == 1 and first != second  # each request its own extension
