"""The README's fenced code blocks, each with the ``<!-- docs-test: ... -->`` marker on the
line before it (how the tests run it), for the tests that run what the README shows."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"

_BLOCK = re.compile(r"(?:<!-- docs-test: (?P<marker>[^\n]*?) -->\n)?```(?P<lang>\w*)\n(?P<code>.*?)```", re.S)


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    #: the marker's text (``run``, ``not run: <why>``, ``file <path>``…); None without one
    marker: str | None
    line: int

    def __str__(self) -> str:
        return f"README.md line {self.line} ({self.lang} block)"


def readme_blocks(lang: str | None = None) -> list[Block]:
    text = README.read_text()
    blocks = [
        Block(m["lang"], m["code"], m["marker"], text.count("\n", 0, m.start("code")))
        for m in _BLOCK.finditer(text)
    ]
    return [b for b in blocks if lang is None or b.lang == lang]
