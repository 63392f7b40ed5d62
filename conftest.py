"""Checks on the whole test session, whatever it collects."""

from __future__ import annotations

from collections import Counter

import pytest
from _pytest.nodeid import NodeId


def _shared_ids(items: list[pytest.Item]) -> set[str]:
    return {node_id for node_id, count in Counter(item.nodeid for item in items).items() if count > 1}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test known by an id of its own. schemathesis's cases of one test (a route each)
    have names of their own (``test_x[GET /api/me]``) but share the function's node id (it
    sets ``_nodeid``, which pytest 9 no longer reads), and pytest-xdist knows a test by its id:
    of the 43 it ran one and reported the run whole, with status 0. Such an item takes its name
    as the last part of its id, as a parametrized test has. Ids shared after that stop a run
    under xdist (a worker has ``workerinput``)."""
    shared = _shared_ids(items)
    for item in items:
        prefix, _, last = item.nodeid.rpartition("::")
        if item.nodeid in shared and item.name != last:
            item._id = NodeId.parse(f"{prefix}::{item.name}")  # pytest's own field for it (9.x)
    left = _shared_ids(items)
    if left and hasattr(config, "workerinput"):
        raise pytest.UsageError(f"tests share node ids, which pytest-xdist would run once each: {sorted(left)[:5]}")
