"""The line protocol of ``wizard-arena play --cmd`` (sdk.line_bot), against real programs: a
turn goes out as one JSON line, the move comes back as one, stderr becomes the move's debug
text; wrong answers, exits and slow answers are handled as the README says."""

from __future__ import annotations

import json
import shlex
import sys
import threading
import time
from pathlib import Path

import pytest

from sdk import line_bot
from sdk.bot import DEBUG_MAX_BYTES, Decision
from sdk.client import Match
from sdk.line_bot import ANSWERS_PER_TURN, EXIT_GRACE_SECONDS, UNANSWERED_MOST, LineBot
from wizard import MatchConfig, Move, new_match


def a_turn(match_id: str = "m1", version: int = 3) -> Match:
    state = new_match(MatchConfig.create("WIZARD", 3, ()), "line-bot-seed", "ab")
    data = state.view(state.awaiting()[0]).to_dict()
    return Match({**data, "id": match_id, "version": version, "status": "ACTIVE", "moveTimeoutMs": 5000})


def program(tmp_path: Path, body: str, name: str = "bot.py") -> LineBot:
    """A LineBot running ``body``, a Python program; each line it reads is in ``msg``, and
    it logs every line it reads to ``seen.jsonl`` beside it."""
    source = tmp_path / name
    source.write_text(
        "import json, sys, time, os\n"
        f"seen = open({str(tmp_path / 'seen.jsonl')!r}, 'a')\n"
        "def send(obj):\n    print(json.dumps(obj) if not isinstance(obj, str) else obj, flush=True)\n"
        "for line in sys.stdin:\n"
        "    msg = json.loads(line)\n"
        "    seen.write(line); seen.flush()\n"
        + "".join(f"    {row}\n" for row in body.strip().splitlines())
    )
    bot = LineBot(f"{shlex.quote(sys.executable)} {shlex.quote(str(source))}", first_restart=0.05, most_restart=0.2)
    bot.start()
    return bot


def seen(tmp_path: Path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "seen.jsonl").read_text().splitlines()]


FIRST_LEGAL = "send({k: v for k, v in msg['match']['legalMoves'][0].items() if v is not None})"


def test_a_turn_is_one_line_and_the_answer_one_line_with_stderr_as_debug(tmp_path):
    bot = program(tmp_path, "print('thinking about', msg['matchId'], file=sys.stderr, flush=True)\n" + FIRST_LEGAL)
    try:
        turn = a_turn()
        decision = bot.decide(turn, time.monotonic() + 5)
        assert decision.move == Move(bid=0)
        assert decision.debug == "thinking about m1\n"
        [written] = seen(tmp_path)
        assert written == {"type": "turn", "matchId": "m1", "match": turn.data}
        # a second turn: its own debug, nothing of the first's
        decision = bot.decide(a_turn("m2"), time.monotonic() + 5)
        assert decision.debug == "thinking about m2\n"
    finally:
        bot.close()


def test_a_line_that_is_no_move_is_answered_with_an_error_and_the_turn_again(tmp_path):
    bot = program(tmp_path, "send('not json' if msg['type'] == 'turn' else {'bid': 1, 'matchId': msg['matchId']})")
    try:
        decision = bot.decide(a_turn(), time.monotonic() + 5)
        assert decision.move == Move(bid=1)
        turn, error = seen(tmp_path)
        assert error["type"] == "error" and error["code"] == "BAD_INPUT" and error["matchId"] == "m1"
        assert "not JSON" in error["message"] and error["answer"] == "not json"
        assert error["match"] == turn["match"]
    finally:
        bot.close()


def test_a_program_that_keeps_answering_no_move_gives_the_turn_up(tmp_path):
    bot = program(tmp_path, "send({'bid': 1, 'card': 'R7'})")
    try:
        with pytest.raises(RuntimeError, match="wrong answers"):
            bot.decide(a_turn(), time.monotonic() + 5)
        lines = seen(tmp_path)
        assert len(lines) == ANSWERS_PER_TURN
        assert "exactly one of bid, card, trump" in lines[-1]["message"]
    finally:
        bot.close()


def test_a_refused_move_is_written_back_with_the_servers_code_and_message(tmp_path):
    bot = program(tmp_path, "send({'bid': 9} if msg['type'] == 'turn' else {'bid': 0})")
    try:
        turn = a_turn()
        first = bot.decide(turn, time.monotonic() + 5)
        assert first.move == Move(bid=9)
        again = bot.retry(turn, first.move, "ILLEGAL_MOVE", "bid 9 is not legal; legal: bid 0, bid 1", time.monotonic() + 5)
        assert again is not None and again.move == Move(bid=0)
        error = seen(tmp_path)[-1]
        assert error == {
            "type": "error", "matchId": "m1", "code": "ILLEGAL_MOVE", "message": "bid 9 is not legal; legal: bid 0, bid 1",
            "answer": {"bid": 9}, "match": turn.data,
        }
        # the refusals of one turn are counted: at the limit the turn is left to the server
        for _ in range(ANSWERS_PER_TURN - 2):
            assert bot.retry(turn, Move(bid=9), "ILLEGAL_MOVE", "no", time.monotonic() + 5) is not None
        assert bot.retry(turn, Move(bid=9), "ILLEGAL_MOVE", "no", time.monotonic() + 5) is None
    finally:
        bot.close()


def test_a_program_that_crashes_is_started_again_and_given_the_turn(tmp_path):
    # the first process dies on its first turn; the next one answers
    marker = tmp_path / "crashed"
    bot = program(
        tmp_path,
        f"if not os.path.exists({str(marker)!r}):\n"
        f"    open({str(marker)!r}, 'w').close(); print('dying', file=sys.stderr, flush=True); sys.exit(3)\n"
        + FIRST_LEGAL,
    )
    try:
        decision = bot.decide(a_turn(), time.monotonic() + 5)
        assert decision.move == Move(bid=0)
        assert [line["type"] for line in seen(tmp_path)] == ["turn", "turn"]  # the same turn, to the new process
        assert decision.debug is None  # the dead process's stderr went to the terminal, not with this move
    finally:
        bot.close()


def test_a_slow_answer_is_given_up_at_the_clock_and_dropped_when_it_comes(tmp_path):
    bot = program(tmp_path, "time.sleep(1.0 if msg['matchId'] == 'slow' else 0)\nsend({'bid': 1 if msg['matchId'] == 'slow' else 0})")
    try:
        with pytest.raises(TimeoutError):
            bot.decide(a_turn("slow"), time.monotonic() + 0.2)
        # the late {"bid": 1} is not taken for the next turn's answer
        decision = bot.decide(a_turn("next"), time.monotonic() + 5)
        assert decision.move == Move(bid=0)
    finally:
        bot.close()


def test_debug_text_is_cut_to_what_a_move_keeps(tmp_path):
    bot = program(tmp_path, "sys.stderr.write('é' * 5000); sys.stderr.flush()\n" + FIRST_LEGAL)
    try:
        decision = bot.decide(a_turn(), time.monotonic() + 5)
        assert decision.debug is not None
        assert decision.debug == "é" * (DEBUG_MAX_BYTES // 2)
    finally:
        bot.close()


def test_a_command_that_cannot_run_is_said_at_once():
    with pytest.raises(ValueError, match="cannot run --cmd"):
        LineBot("/nonexistent/bot --fast").start()
    with pytest.raises(ValueError, match="--cmd is empty"):
        LineBot("  ")


def test_turns_of_several_matches_at_once_go_to_the_program_one_at_a_time(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    bot = program(tmp_path, "time.sleep(0.05)\nsend({'bid': int(msg['matchId'][1:]) % 2, 'matchId': msg['matchId']})")
    try:
        with ThreadPoolExecutor(4) as pool:
            decisions = list(pool.map(lambda n: bot.decide(a_turn(f"m{n}"), time.monotonic() + 5), range(6)))
        assert [d.move for d in decisions] == [Move(bid=n % 2) for n in range(6)]
        assert sorted(line["matchId"] for line in seen(tmp_path)) == [f"m{n}" for n in range(6)]
    finally:
        bot.close()


def test_a_program_that_owes_too_many_answers_is_taken_for_hung_and_started_again(tmp_path):
    marker = tmp_path / "hung-once"
    bot = program(
        tmp_path,
        f"if not os.path.exists({str(marker)!r}):\n    open({str(marker)!r}, 'w').close(); time.sleep(60)\n" + FIRST_LEGAL,
    )
    try:
        for _ in range(UNANSWERED_MOST):  # each turn passes unanswered; the lines pile up unread
            with pytest.raises(TimeoutError):
                bot.decide(a_turn(), time.monotonic() + 0.2)
        decision = bot.decide(a_turn("after"), time.monotonic() + 5)  # to a new process
        assert decision.move == Move(bid=0)
        assert seen(tmp_path)[-1]["matchId"] == "after"
    finally:
        bot.close()


def test_a_turn_answered_again_sends_the_debug_text_of_both_answers_within_the_limit():
    first, second = Decision(Move(bid=9), "tried 9\n"), Decision(Move(bid=0), "then 0\n")
    assert first.then(second) == Decision(Move(bid=0), "tried 9\nthen 0\n")
    assert Decision(Move(bid=0)).then(Decision(Move(bid=1))).debug is None
    long = Decision(Move(bid=9), "x" * 4000).then(Decision(Move(bid=0), "y" * 4000))
    assert long.debug == "x" * 4000 + "y" * (DEBUG_MAX_BYTES - 4000)
    assert Decision(Move(bid=0), "\ud800 odd").debug == "? odd"  # what the server can store


def test_closing_ends_the_program_by_closing_its_stdin(tmp_path):
    bot = program(tmp_path, FIRST_LEGAL)
    bot.decide(a_turn(), time.monotonic() + 5)
    process = bot._process
    assert process is not None
    started = time.monotonic()
    bot.close()
    assert process.poll() == 0  # it read to the end of its input and exited by itself
    assert time.monotonic() - started < EXIT_GRACE_SECONDS


def test_a_program_that_closes_its_stdout_but_lives_on_does_not_hold_the_runner(tmp_path):
    # its stdout's end reads as an exit; waiting for the exit must not wait for ever: the
    # program is stopped, the turn given up at the move clock
    bot = program(tmp_path, "os.close(1); time.sleep(60)")
    try:
        process = bot._process
        assert process is not None
        outcome: list[BaseException | Decision] = []
        thread = threading.Thread(target=lambda: outcome.append(_decided(bot)), daemon=True)
        thread.start()
        thread.join(10)
        assert not thread.is_alive(), "decide() still waits for a program that will not exit"
        assert process.poll() is not None  # stopped, not left behind
    finally:
        bot.close()


def _decided(bot: LineBot, seconds: float = 1) -> BaseException | Decision:
    try:
        return bot.decide(a_turn(), time.monotonic() + seconds)
    except (TimeoutError, RuntimeError) as e:
        return e


def test_closing_while_a_restart_waits_starts_no_program_again(tmp_path):
    # the program dies on its turn; the runner stops during the back-off before its restart
    marker = tmp_path / "crashed"
    bot = program(
        tmp_path,
        f"if not os.path.exists({str(marker)!r}):\n    open({str(marker)!r}, 'w').close(); sys.exit(3)\n" + FIRST_LEGAL,
    )
    bot._restart_backoff.first = 1.0
    outcome: list[BaseException | Decision] = []
    thread = threading.Thread(target=lambda: outcome.append(_decided(bot, 5)), daemon=True)
    thread.start()
    deadline = time.monotonic() + 5
    while bot._process is not None and time.monotonic() < deadline:  # it died: the back-off runs
        time.sleep(0.01)
    bot.close()
    thread.join(10)
    assert not thread.is_alive()
    assert bot._process is None, "a program was started after the runner stopped"
    assert isinstance(outcome[0], RuntimeError)


def test_a_program_left_one_answer_behind_by_a_partial_line_is_started_again(tmp_path):
    # its first answer is a partial line, which its next answer completes: from then on each
    # of its answers arrives while the SDK still counts the one line it never answered, so it
    # is dropped as late; after a few such turns the program is started again, in step
    marker = tmp_path / "partial"
    bot = program(
        tmp_path,
        f"if not os.path.exists({str(marker)!r}):\n"
        f"    open({str(marker)!r}, 'w').close(); sys.stdout.write('{{\"bid\": '); sys.stdout.flush(); continue\n"
        + FIRST_LEGAL,
    )
    try:
        decided = []
        for n in range(UNANSWERED_MOST + 3):
            try:
                decided.append(bot.decide(a_turn(version=n), time.monotonic() + 0.5).move)
            except TimeoutError:
                decided.append(None)
        assert decided[-1] == Move(bid=0), decided
    finally:
        bot.close()


def test_a_program_that_floods_stdout_is_not_buffered_without_bound(tmp_path, monkeypatch):
    # after its first answer it writes lines without end: the SDK keeps no more of them than
    # it takes (past a bound, lines are dropped), however many turns pass
    bot = program(
        tmp_path,
        "import threading\n"
        "threading.Thread(target=lambda: [print('x' * 100) for _ in iter(int, 1)], daemon=True).start()\n"
        + FIRST_LEGAL,
    )
    try:
        monkeypatch.setattr(line_bot, "LINES_KEPT_BYTES", 1 << 16)
        for n in range(20):
            try:
                bot.decide(a_turn(version=n), time.monotonic() + 0.5)
            except (TimeoutError, RuntimeError):
                pass
            assert sum(map(len, bot._lines)) <= 1 << 16, (n, len(bot._lines))
    finally:
        bot.close()
