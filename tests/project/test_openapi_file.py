"""The checked-in ``openapi.json`` is the code's REST API document (``wizard-arena openapi``),
an OpenAPI 3.1 document whose every route is one the app serves."""

from __future__ import annotations

import json
from pathlib import Path

from service.api.app import openapi_json
from service.api.graphql.schema import build_schema
from service.api.rest_api import OPERATIONS
from service.settings import Settings

OPENAPI_FILE = Path(__file__).resolve().parents[2] / "openapi.json"
REGENERATE = ".venv/bin/wizard-arena openapi > openapi.json"


def test_checked_in_document_matches_the_code() -> None:
    assert OPENAPI_FILE.exists(), f"openapi.json is missing: run `{REGENERATE}` at the repository root"
    assert OPENAPI_FILE.read_text() == openapi_json(build_schema(Settings())), (
        f"openapi.json differs from the code's REST API: run `{REGENERATE}` at the repository root, review the "
        "diff and commit it"
    )


def test_the_document_is_openapi_3_1_with_every_operation_once() -> None:
    document = json.loads(OPENAPI_FILE.read_text())
    assert document["openapi"] == "3.1.0"
    ids = [op["operationId"] for methods in document["paths"].values() for op in methods.values()]
    assert sorted(ids) == sorted(o.name for o in OPERATIONS) and len(set(ids)) == len(ids)
    for path, methods in document["paths"].items():
        assert path.startswith("/api/")
        for described in methods.values():
            assert "4XX" in described["responses"], path
            for parameter in described.get("parameters", []):
                assert parameter["in"] != "path" or parameter["required"], (path, parameter)
