"""The shapes the public API answers with (``../shared/API.md``'s contract), field by field,
written once: the service's GraphQL types are checked against them when the schema is built,
and the SDK's and the tests' queries are made from them. Pure: no dependency at all."""

from contract.limits import MOVE_DEBUG_MAX_BYTES, utf8_prefix
from contract.match import MATCH, Field, Shape

__all__ = ["MATCH", "MOVE_DEBUG_MAX_BYTES", "Field", "Shape", "utf8_prefix"]
