"""Limits of the public API that its clients need to know as well as the server: written once,
here, so that the SDK cuts what it sends to what the server takes."""

from __future__ import annotations

#: the most debug text one move may carry (``submitMove(debug:)``, REST ``"debug"``), in
#: UTF-8 bytes: the server refuses more with ``BAD_INPUT``
MOVE_DEBUG_MAX_BYTES = 4096
