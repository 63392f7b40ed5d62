"""Limits of the public API that its clients need to know as well as the server: written once,
here, so that the SDK cuts what it sends to what the server takes."""

from __future__ import annotations

#: the most debug text one move may carry (``submitMove(debug:)``, REST ``"debug"``), in
#: UTF-8 bytes: the server refuses more with ``BAD_INPUT``
MOVE_DEBUG_MAX_BYTES = 4096


def utf8_prefix(text: str, most: int) -> str:
    """The longest start of ``text`` that is at most ``most`` bytes in UTF-8 (no character
    cut; a lone surrogate, which no UTF-8 holds and the server refuses, becomes ``?``).

    >>> utf8_prefix("naïve", 3), utf8_prefix("naïve", 4)
    ('na', 'naï')
    """
    encoded = text.encode("utf-8", "replace")
    if len(encoded) <= most:
        return encoded.decode()
    return encoded[:most].decode("utf-8", "ignore")
