"""A bot in any language: a program that reads each turn as one JSON line on its stdin and
writes its move as one JSON line on its stdout (``wizard-arena play --cmd "./mybot"``).

The protocol (README, "Bots in any language"):

- One process for the whole ``play`` run, started with it (as UCI engines are). The SDK
  writes one line at a time and waits for the answer before it writes the next, so turns of
  several matches reach the program one after another, each naming its ``matchId``.
- Every line the SDK writes asks for exactly one line back. A turn is
  ``{"type": "turn", "matchId": …, "match": {…}}``, ``match`` being the seat's view as the
  GraphQL ``Match`` (the SDK's fields of it, GraphQL names, the engine's card codes, with
  ``legalMoves``). The answer is ``{"bid": n}``, ``{"card": "…"}`` or ``{"trump": "…"}``
  (a ``"matchId"`` beside it is allowed and ignored).
- An answer that is not such a move, or a move the server refuses (``ILLEGAL_MOVE``), is
  answered with ``{"type": "error", "matchId", "code", "message", "answer", "match"}``: the
  code and message (the server's, or ``BAD_INPUT`` for a line that is no move) and the turn
  again, so even a program that keeps no state can answer it. The program answers it like a
  turn, on the same move clock; after :data:`ANSWERS_PER_TURN` wrong answers the SDK stops
  asking and the server makes the move at the deadline.
- Too slow: the move clock decides. At ``moveTimeoutMs`` the SDK stops waiting and the
  server makes the move; the program's late answer, when it comes, is read and dropped (the
  SDK counts the lines it is owed, so a late answer is never taken for the next turn's). A
  program owing answers to :data:`UNANSWERED_MOST` lines is taken for hung: it is killed and
  started again. So is one whose answers stay one line behind (it never answered one line, a
  partial line, say): after :data:`UNANSWERED_MOST` turns in a row that each got only a late
  answer, it is started again, in step.
- What the program writes to stderr while a turn waits for its answer (up to the answer and
  what is already written when it comes) is that move's debug text: sent with the move
  (``submitMove(debug:)``, its first 4096 bytes) and shown to the bot's owner alone, in the
  match's record. It is also logged on the terminal. Stderr written between turns is only
  logged.
- A program that exits or crashes is started again when a line is next due to it, after a back-off that doubles from
  half a second to 30 seconds (reset by an answer), said on the terminal; a turn it left
  unanswered is written to the new process when the move clock still has room.
"""

from __future__ import annotations

import json
import logging
import os
import selectors
import shlex
import signal
import subprocess
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from sdk.bot import Bot, Decision
from sdk.runner import Backoff
from wizard import Move, WizardError

if TYPE_CHECKING:
    from sdk.client import Match

log = logging.getLogger("wizard_arena.bot")

#: wrong answers (a line that is no move, a move the server refused) after which the SDK
#: stops asking for the turn
ANSWERS_PER_TURN = 3
#: lines a program may leave unanswered (turns it let pass) before it is taken for hung and
#: started again, rather than sent more lines it will not read
UNANSWERED_MOST = 3
#: stderr kept for one turn (for the terminal; a move sends the first DEBUG_MAX_BYTES)
STDERR_KEPT_BYTES = 64 * 1024
#: the longest line read from the program (a longer one is a wrong answer)
LINE_MAX_BYTES = 1 << 20
#: complete stdout lines kept not yet taken, in bytes: past it, more lines are read and dropped
#: (a program that floods stdout is not buffered without bound)
LINES_KEPT_BYTES = 2 * LINE_MAX_BYTES
#: time the program is given to exit when the runner stops, before it is killed
EXIT_GRACE_SECONDS = 2.0


class ProgramExited(Exception):
    """The program's stdout closed: it exited or crashed."""


class LineBot(Bot):
    """Plays by a program that speaks the line protocol (this module's docstring).

    One lock serialises the turns: the program sees one line at a time. The I/O runs in the
    runner's decision threads; :meth:`close` stops the program from any thread."""

    def __init__(self, command: str, first_restart: float = 0.5, most_restart: float = 30.0) -> None:
        try:
            self.argv = shlex.split(command)
        except ValueError as e:
            raise ValueError(f"--cmd {command!r}: {e}") from None
        if not self.argv:
            raise ValueError("--cmd is empty: give the command that runs your bot, e.g. --cmd \"node mybot.mjs\"")
        self.command = command
        self.name = command
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._selector: selectors.BaseSelector | None = None
        #: the bytes of stdout's unfinished line
        self._partial = bytearray()
        #: complete stdout lines not yet taken
        self._lines: deque[bytes] = deque()
        #: the bytes of ``_lines``
        self._lines_bytes = 0
        #: stderr read since the current turn was written
        self._stderr = bytearray()
        #: lines written to this process whose answers have not been read yet
        self._owed = 0
        #: whether the program's stdout has closed (it exited, or will)
        self._out_closed = False
        #: whether the last wait for an answer dropped a late one
        self._dropped_late = False
        #: turns in a row that got only a late answer (the program may be a line behind)
        self._behind = 0
        #: the wait before starting the program again after an exit (one process: no jitter)
        self._restart_backoff = Backoff(first_restart, most_restart, jitter=False)
        #: no start before this time.monotonic() (the back-off after an exit)
        self._not_before = 0.0
        #: wrong answers given to each turn, by (match id, version)
        self._wrong: dict[tuple[str, int], int] = {}
        self._closed = False

    # ------------------------------------------------------------------ the process
    def start(self) -> None:
        """Starts the program now (``play`` does, so that a command that cannot run is said at
        once); raises ``ValueError`` saying why it cannot."""
        with self._lock:
            self._start()

    def _start(self) -> None:
        try:
            process = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0,
                # out of the terminal's process group: Ctrl-C stops the runner, which then stops
                # the program (closing its stdin first), rather than both dying at once
                start_new_session=True,
            )
        except OSError as e:
            raise ValueError(f"cannot run --cmd {self.command!r}: {e}") from None
        assert process.stdout is not None and process.stderr is not None
        selector = selectors.DefaultSelector()
        for stream, name in ((process.stdout, "out"), (process.stderr, "err")):
            os.set_blocking(stream.fileno(), False)
            selector.register(stream, selectors.EVENT_READ, name)
        self._process, self._selector = process, selector
        self._partial = bytearray()
        self._lines.clear()
        self._lines_bytes = 0
        self._owed = 0
        self._out_closed = False
        self._behind = 0
        log.info("started %s (pid %d)", self.command, process.pid)

    def _gone(self) -> None:
        """The program exited: note it, and when it may be started again."""
        process = self._process
        assert process is not None
        try:  # its stdout closed: it exits, or (stdout closed by itself) it is stopped
            code = process.wait(EXIT_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            _signal(process, signal.SIGKILL)
            code = process.wait()
        self._drain(0)
        self._flush_stderr("as it exited")
        self._release()
        if self._closed:  # stopped by close(): nothing to start again
            return
        delay = self._restart_backoff.next()
        self._not_before = time.monotonic() + delay
        log.error("%s exited with code %s; starting it again in %.1f s", self.command, code, delay)

    def _release(self) -> None:
        if self._selector is not None:
            self._selector.close()
        process = self._process
        if process is not None:
            for stream in (process.stdin, process.stdout, process.stderr):
                if stream is not None:
                    stream.close()
        self._process, self._selector = None, None

    def close(self) -> None:
        """Stops the program: closes its stdin (its cue to exit), then terminates it, then kills it."""
        self._closed = True
        process = self._process
        if process is None:
            return
        try:
            if process.stdin is not None:
                process.stdin.close()
            process.wait(EXIT_GRACE_SECONDS)
        except (OSError, subprocess.TimeoutExpired):
            _signal(process, signal.SIGTERM)
            try:
                process.wait(EXIT_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                _signal(process, signal.SIGKILL)
                process.wait()

    # ------------------------------------------------------------------ reading and writing
    def _drain(self, timeout: float) -> None:
        """Reads what the program has written, waiting at most ``timeout`` for something."""
        assert self._selector is not None
        for key, _ in self._selector.select(timeout):
            name = key.data
            try:
                chunk = os.read(key.fd, 65536)
            except BlockingIOError:
                continue
            if not chunk:  # closed: stdout's end is the program's (seen by _answer); stderr's may come first
                self._selector.unregister(key.fileobj)
                self._out_closed = self._out_closed or name == "out"
                continue
            if name == "err":  # kept up to a bound (a move sends less still); the rest is read and dropped
                self._stderr += chunk[: max(0, STDERR_KEPT_BYTES - len(self._stderr))]
                continue
            self._partial += chunk
            *complete, rest = self._partial.split(b"\n")
            dropped = 0
            for line in complete:
                if self._lines_bytes + len(line) > LINES_KEPT_BYTES:
                    dropped += 1
                    continue
                self._lines.append(bytes(line))
                self._lines_bytes += len(line)
            if dropped:
                log.warning("%s wrote more lines than it was asked for: %d dropped", self.command, dropped)
            self._partial = rest[-LINE_MAX_BYTES:]  # a longer line is cut, so no answer

    def _write(self, message: dict[str, Any]) -> None:
        process = self._process
        assert process is not None and process.stdin is not None
        data = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        view = memoryview(data)
        while view:
            try:
                written = os.write(process.stdin.fileno(), view)
            except BlockingIOError:  # pragma: no cover - stdin is blocking
                continue
            view = view[written:]
        self._owed += 1

    def _answer(self, until: float) -> bytes | None:
        """The answer to the line written last (answers owed to earlier lines, late ones, are
        read and dropped); None when ``until`` passes first. Raises :class:`ProgramExited`."""
        self._dropped_late = False
        while True:
            while self._lines:
                line = self._lines.popleft()
                self._lines_bytes -= len(line)
                if not line.strip():
                    continue  # blank lines are no answers
                self._owed -= 1
                if self._owed > 0:
                    log.warning("%s answered late (after its move clock): %s: dropped", self.command, _shown(line))
                    self._dropped_late = True
                    continue
                self._drain(0)  # what it wrote to stderr before its answer belongs with it
                return line
            if self._out_closed:
                raise ProgramExited()
            left = until - time.monotonic()
            if left <= 0:
                return None
            self._drain(left)

    def _flush_stderr(self, when: str) -> None:
        """Logs (only) what the program wrote to stderr outside a turn."""
        if self._stderr:
            for line in self._stderr.decode("utf-8", "replace").splitlines():
                log.info("%s stderr (%s): %s", self.command, when, line)
            self._stderr.clear()

    # ------------------------------------------------------------------ turns
    def decide(self, match: Match, until: float) -> Decision:
        return self._exchange(match, {"type": "turn", "matchId": match.id, "match": match.data}, until)

    def retry(self, match: Match, refused: Move, code: str, message: str, until: float) -> Decision | None:
        key = (match.id, match.version)
        with self._lock:
            wrong = self._wrong[key] = self._wrong.get(key, 0) + 1
        if wrong >= ANSWERS_PER_TURN:
            log.error("match %s: %d wrong answers to one turn: the server makes the move", match.id, wrong)
            return None
        return self._exchange(match, _error(match, code, message, refused.to_dict()), until)

    def _exchange(self, match: Match, message: dict[str, Any], until: float) -> Decision:
        """Writes ``message`` and reads the program's move, answering lines that are no move with
        an error line; raises ``TimeoutError`` at ``until``, ``RuntimeError`` after too many."""
        key = (match.id, match.version)
        with self._lock:
            if message["type"] == "turn":  # a new turn of the match: its earlier turns' counts go
                self._wrong = {k: n for k, n in self._wrong.items() if k[0] != match.id and len(self._wrong) < 10_000}
            while True:
                if self._closed:
                    raise RuntimeError("the runner is stopping")
                if time.monotonic() >= until:  # its clock ran out while other matches' turns had the program
                    raise TimeoutError(f"the move clock ran out before {self.command} was free")
                if self._process is None:
                    wait = self._not_before - time.monotonic()
                    if wait > until - time.monotonic():
                        raise TimeoutError(f"{self.command} is started again only after the move clock")
                    if wait > 0:
                        time.sleep(wait)
                        continue  # (the runner may have stopped meanwhile: seen at the top)
                    self._start()
                    if self._closed:  # stopped as it started: close() saw no program to stop
                        self.close()
                        continue
                self._drain(0)
                self._flush_stderr("between turns")
                if self._owed >= UNANSWERED_MOST:
                    log.error("%s has not answered its last %d lines: taken for hung, it is stopped", self.command, self._owed)
                    _signal(self._process, signal.SIGKILL)
                    self._gone()
                    continue
                try:
                    self._write(message)
                    line = self._answer(until)
                except (ProgramExited, BrokenPipeError, ConnectionResetError):
                    self._gone()
                    continue  # the turn again, to the new process, if the clock allows
                debug = self._take_debug(match.id)
                if line is None:
                    self._behind = self._behind + 1 if self._dropped_late else 0
                    if self._behind >= UNANSWERED_MOST:  # each answer one line behind: start it again, in step
                        log.error("%s answered only late %d turns in a row (one line behind, a partial line say): "
                                  "it is started again", self.command, self._behind)
                        _signal(self._process, signal.SIGKILL)
                        self._gone()
                    raise TimeoutError(f"{self.command} did not answer within the move clock")
                self._behind = 0
                self._restart_backoff.reset()  # it answers: a later exit backs off from the start again
                try:
                    return Decision(_move_of(line), debug)
                except ValueError as e:
                    self._wrong[key] = self._wrong.get(key, 0) + 1
                    log.error("match %s: %s answered %s: %s", match.id, self.command, _shown(line), e)
                    if self._wrong[key] >= ANSWERS_PER_TURN:
                        raise RuntimeError(f"{ANSWERS_PER_TURN} wrong answers to one turn") from None
                    message = _error(match, "BAD_INPUT", str(e), line.decode("utf-8", "replace"))

    def _take_debug(self, match_id: str) -> str | None:
        """This move's stderr, logged, as the debug text to send (the first DEBUG_MAX_BYTES of it)."""
        if not self._stderr:
            return None
        text = self._stderr.decode("utf-8", "replace")
        self._stderr.clear()
        for line in text.splitlines():
            log.info("match %s: %s stderr: %s", match_id, self.command, line)
        return text  # Decision cuts it to DEBUG_MAX_BYTES


def _signal(process: subprocess.Popen[bytes] | None, sig: signal.Signals) -> None:
    """Sends ``sig`` to the program and whatever it started (its process group: it was started
    in a session of its own), so that ``sh -c`` wrappers do not leave their children behind."""
    if process is None or process.poll() is not None:
        return
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        process.send_signal(sig)


def _move_of(line: bytes) -> Move:
    """The move a program's answer line names; ``ValueError`` saying what is wrong with it."""
    try:
        answer = json.loads(line)
    except (ValueError, RecursionError):
        raise ValueError('the line is not JSON: answer one line such as {"bid": 1}, {"card": "R7"} or {"trump": "BLUE"}') from None
    if not isinstance(answer, dict):
        raise ValueError('the line is not a JSON object: answer {"bid": 1}, {"card": "R7"} or {"trump": "BLUE"}')
    answer.pop("matchId", None)
    try:
        return Move.from_dict(answer)
    except WizardError as e:
        raise ValueError(str(e)) from None


def _error(match: Match, code: str, message: str, answer: Any) -> dict[str, Any]:
    return {"type": "error", "matchId": match.id, "code": code, "message": message, "answer": answer, "match": match.data}


def _shown(line: bytes) -> str:
    text = line.decode("utf-8", "replace")
    return repr(text if len(text) <= 200 else text[:200] + "…")
