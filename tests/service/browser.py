"""A real headless Chromium for the page tests (Debian's ``chromium``, which ``make test``
installs when missing), driven by Playwright; and what the tests look at in its screenshots.

Set ``ARENA_SCREENSHOTS=<folder>`` to keep the screenshots the tests take (the README's come
from there)."""

from __future__ import annotations

import io
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
#: flags for a headless Chromium in a container, with nothing of its own going out
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
#: a phone's width in CSS pixels (an iPhone 12 to 15)
PHONE = {"width": 390, "height": 844}


@contextmanager
def chromium_page(profile: Path, viewport: dict[str, int] | None = None) -> Iterator[Any]:
    """A page of a fresh headless Chromium (its own profile, so an empty cache); every request,
    WebSocket, console message and page error it sees is recorded on it as ``seen``."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"no Chromium at {CHROMIUM}: `make test` installs Debian's (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=FLAGS,
            viewport=viewport or {"width": 1200, "height": 900},
        )
        try:
            page = context.pages[0] if context.pages else context.new_page()
            seen: dict[str, list[Any]] = {"requests": [], "sockets": [], "problems": [], "finished": []}
            page.on("request", lambda request: seen["requests"].append(request.url))
            page.on("requestfinished", lambda request: seen["finished"].append(request))
            page.on("websocket", lambda socket: seen["sockets"].append(socket.url))
            page.on("requestfailed", lambda request: seen["problems"].append(f"failed: {request.url} {request.failure}"))
            page.on("pageerror", lambda error: seen["problems"].append(f"page error: {error}"))
            page.on("console", lambda message: message.type in ("error", "warning") and seen["problems"].append(
                f"console {message.type}: {message.text}"
            ))
            page.seen = seen
            yield page
        finally:
            context.close()


def keep_screenshot(page: Any, name: str) -> bytes:
    """A screenshot of the whole page, kept in ``ARENA_SCREENSHOTS`` when that is set."""
    png: bytes = page.screenshot(full_page=True)
    folder = os.environ.get("ARENA_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / f"{name}.png").write_bytes(png)
    return png


def ink(png: bytes) -> tuple[int, int, int]:
    """The mean colour of a screenshot's coloured pixels (neither near white, near black nor
    grey): what a card is printed in."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    coloured = [p for p in image.get_flattened_data() if max(p) - min(p) > 60]
    assert coloured, "the screenshot has no colour at all"
    n = len(coloured)
    return (sum(p[0] for p in coloured) // n, sum(p[1] for p in coloured) // n, sum(p[2] for p in coloured) // n)


def looks_like(card: str, colour: tuple[int, int, int]) -> bool:
    """Whether a card's ink is its suit's colour (blue, green, red, yellow), a Wizard's purple
    and gold, or a Jester's grey (which has no colour: its label is white on grey stripes)."""
    r, g, b = colour
    kind = card[0]
    return {
        "B": b > r + 40 and b > g,
        "G": g > r + 40 and g > b + 20,
        "R": r > g + 60 and r > b + 60,
        "Y": r > b + 60 and g > b + 40,
        "W": b > g and r > g,  # purple, with gold
    }[kind]
