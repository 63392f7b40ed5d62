"""The README's configuration table and ``service.settings.Settings`` agree: one row per
field, named by the environment variable that sets it, with the field's default."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Literal, get_args, get_origin

import pytest
from pydantic import AliasChoices

from service.settings import Settings

README = Path(__file__).resolve().parents[2] / "README.md"


def env_var(name: str) -> str:
    """The environment variable that sets field ``name`` (its alias, else ARENA_<FIELD>)."""
    alias = Settings.model_fields[name].validation_alias
    if isinstance(alias, AliasChoices):
        return str(alias.choices[0])
    if isinstance(alias, str):
        return alias
    return Settings.model_config.get("env_prefix", "") + name.upper()


def readme_rows() -> dict[str, tuple[str, str]]:
    """env var -> (default cell, meaning cell) from the table under "## Configuration"."""
    text = README.read_text()
    section = re.search(r"^## Configuration\n(.*?)(?=^## )", text, re.S | re.M)
    assert section, 'the README has a "## Configuration" section'
    rows = {}
    for line in section.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and re.fullmatch(r"`[A-Z_]+`", cells[0]):
            rows[cells[0].strip("`")] = (cells[1], cells[2])
    assert rows, "the Configuration section has a table: | env var | default | meaning |"
    return rows


def _same_default(cell: str, default: object) -> bool:
    value = cell.strip("`")
    if default is None:
        return value == "unset"
    if isinstance(default, bool):
        return value.lower() == str(default).lower()
    if isinstance(default, list):  # written as the environment takes it: JSON
        try:
            return bool(json.loads(value) == default)
        except ValueError:
            return False
    if isinstance(default, int | float):
        try:
            return math.isclose(float(value.replace("_", "")), float(default))
        except ValueError:
            return False
    return value == str(default)


def test_every_setting_has_a_row_and_no_row_is_stale():
    documented = set(readme_rows())
    fields = {env_var(name) for name in Settings.model_fields}
    assert not fields - documented, f"settings missing from the README's table: {sorted(fields - documented)}"
    assert not documented - fields, f"README rows for settings that do not exist: {sorted(documented - fields)}"


@pytest.mark.parametrize("name", list(Settings.model_fields))
def test_row_has_the_default_and_a_meaning(name):
    row = readme_rows().get(env_var(name))
    if row is None:
        pytest.skip("reported by test_every_setting_has_a_row_and_no_row_is_stale")
    cell, meaning = row
    default = Settings.model_fields[name].default
    assert _same_default(cell, default), f"README says {env_var(name)} defaults to {cell}; settings.py says {default!r}"
    assert meaning, f"say what {env_var(name)} does"


def test_table_order_follows_settings_py():
    order = [env_var(name) for name in Settings.model_fields]
    assert [v for v in readme_rows() if v in order] == order, "keep the table in settings.py's order"


def test_the_env_vars_named_really_set_the_fields(monkeypatch):
    """Guards env_var() above: each documented variable reaches its field."""
    for name, field in Settings.model_fields.items():
        default = field.default
        if get_origin(field.annotation) is Literal:  # a choice: the last one the field takes
            value = expected = get_args(field.annotation)[-1]
        elif default is None or isinstance(default, str):
            value, expected = "x-value", "x-value"
        elif isinstance(default, Path):
            value, expected = "some/dir", Path("some/dir")
        elif isinstance(default, bool):
            value, expected = str(not default).lower(), not default
        elif isinstance(default, float):
            value, expected = "7.5", 7.5
        elif isinstance(default, list):
            value, expected = '["x-value"]', ["x-value"]
        else:
            value, expected = "5000", 5000
        monkeypatch.setenv(env_var(name), value)
        assert getattr(Settings(), name) == expected, env_var(name)
        monkeypatch.delenv(env_var(name))
