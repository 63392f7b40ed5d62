"""`wizard-arena up` checks the embedded Redis's append-only file before Redis opens it, on
real files written by a real run: an incomplete last write (what a crash mid-write leaves)
is cut off and the run starts without the unfinished change; damage before the end stops the
start with the exact command that repairs it, and changes nothing until that is run."""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import sys
from pathlib import Path

import pytest

from service.store.embedded_redis import AofDamaged, EmbeddedRedis, check_aof, prepare_aof
from tests.service.arena_client import free_port
from tests.service.up_process import Up, run_up

MULTI = b"*1\r\n$5\r\nMULTI\r\n"
BOT = "query($id: ID!) { bot(id: $id) { name } }"


def written_by_a_run(tmp_path: Path, names: list[str]) -> tuple[Path, dict[str, str]]:
    """A data folder whose append-only file a real `up` wrote: the bots ``names`` registered
    in that order (each registration in steps, its bot made visible by one MULTI/EXEC), then a
    clean stop. Their ids."""
    data = tmp_path / "arena"
    up = Up(data, tmp_path / "writer.log").wait_healthy()
    try:
        ids = {name: up.api.register(name)[1] for name in names}
    finally:
        up.stop()
    return data, ids


def making(aof: bytes, bot_id: str) -> int:
    """Where the transaction that makes a bot visible (its hash: the last step of its
    registration to name its key) begins in the append-only file."""
    return aof.rindex(MULTI, 0, aof.rindex(f"{{b:{bot_id}}}:bot".encode()))


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def bot_names(up: Up, ids: dict[str, str]) -> dict[str, str | None]:
    return {
        name: (up.api.data(BOT, {"id": bot_id})["bot"] or {}).get("name") for name, bot_id in ids.items()
    }


def test_an_incomplete_last_write_is_cut_off_and_the_run_starts_without_it(tmp_path: Path) -> None:
    data, ids = written_by_a_run(tmp_path, ["kept-bot", "torn-bot"])
    aof = data / "appendonly.aof"
    whole = aof.read_bytes()
    last = making(whole, ids["torn-bot"])
    cut = last + len(MULTI) + 30  # a crash in the middle of writing it
    aof.write_bytes(whole[:cut])

    up = Up(data, tmp_path / "up.log").wait_healthy()
    try:
        output = up.output()
        assert f"the append-only file {aof} ended in an incomplete write" in output, output
        assert bot_names(up, ids) == {"kept-bot": "kept-bot", "torn-bot": None}, "the torn change is all gone"
    finally:
        up.stop()
    tails = list(data.glob("appendonly.aof.tail-*"))
    assert len(tails) == 1 and tails[0].read_bytes() == whole[last:cut], "the cut bytes are kept"


def test_damage_before_the_end_stops_up_with_the_command_that_repairs_it(tmp_path: Path) -> None:
    data, ids = written_by_a_run(tmp_path, ["before-damage", "after-damage"])
    aof = data / "appendonly.aof"
    whole = aof.read_bytes()
    damage = making(whole, ids["after-damage"])
    aof.write_bytes(whole[:damage] + b"X" + whole[damage + 1:])
    damaged = sha(aof)
    log = (data / "redis.log").read_bytes()
    port = free_port()

    refused = run_up(data, port=port)
    assert refused.returncode == 1, refused
    message = refused.stderr
    assert f"the append-only file {aof} is damaged at byte {damage} of {len(whole)}" in message, message
    assert "Expected prefix '*', got: 'X'" in message, message
    assert "nothing was started and nothing was changed" in message, message
    assert sha(aof) == damaged and (data / "redis.log").read_bytes() == log
    assert not (data / "redis.sock").exists() and not list(data.glob("appendonly.aof.*"))

    # the last line is the command to run, exactly
    command = message.strip().splitlines()[-1].strip()
    assert command == f"ARENA_DATA_DIR={data} wizard-arena up --port {port} --repair-aof"
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    words = shlex.split(command)
    env.update(w.split("=", 1) for w in words[:1])
    up = Up(data, tmp_path / "repair.log", port=port, argv=[*words[1:], "--log-level", "warning"], env=env)
    try:
        up.wait_healthy()
        output = up.output()
        assert f"repaired the append-only file {aof}: kept its first {damage} bytes" in output, output
        assert bot_names(up, ids) == {"before-damage": "before-damage", "after-damage": None}
    finally:
        up.stop()
    copies = list(data.glob("appendonly.aof.damaged-*"))
    assert len(copies) == 1 and sha(copies[0]) == damaged, "the whole damaged file is kept"


@pytest.fixture
def small_aof(tmp_path: Path) -> Path:
    """A real append-only file: a few writes, one transaction, then a clean stop."""
    import redis

    server = EmbeddedRedis(tmp_path / "redis")
    client = redis.Redis.from_url(server.start())
    client.set("a", "1")
    with client.pipeline(transaction=True) as pipe:
        pipe.set("b", "2").xadd("s", {"v": "1"}).execute()
    client.close()
    server.stop()
    return tmp_path / "redis" / "appendonly.aof"


def test_a_tail_of_zeros_is_a_cut_not_damage(small_aof: Path) -> None:
    """What a file system leaves where data never reached the disk before a power loss."""
    whole = small_aof.read_bytes()
    small_aof.write_bytes(whole + b"\0" * 4096)
    check = check_aof(small_aof)
    assert (check.good, check.truncated) == (len(whole), True)
    prepare_aof(small_aof, say=lambda _: None)
    assert small_aof.read_bytes() == whole and check_aof(small_aof).valid


@pytest.mark.parametrize("cut", [1, 2, 5, 14, 20])
def test_every_cut_inside_the_last_transaction_is_a_cut(small_aof: Path, cut: int) -> None:
    whole = small_aof.read_bytes()
    start = whole.rindex(MULTI)
    small_aof.write_bytes(whole[: start + cut])
    check = check_aof(small_aof)
    assert (check.good, check.truncated) == (start, True), check


@pytest.mark.parametrize("change", [(b"$1\r\nb", b"$1\rXb"), (b"MULTI", b"MULTX"), (b"$4\r\nEXEC", b"$5\r\nMULTI")])
def test_malformed_bytes_are_damage(small_aof: Path, change: tuple[bytes, bytes]) -> None:
    whole = small_aof.read_bytes()
    assert change[0] in whole
    small_aof.write_bytes(whole.replace(change[0], change[1], 1))
    check = check_aof(small_aof)
    assert not check.valid and not check.truncated, check
    with pytest.raises(AofDamaged, match=re.escape(f"{small_aof} is damaged at byte {check.good}")):
        prepare_aof(small_aof, say=lambda _: None)


def test_after_a_rewrite_the_rdb_preamble_is_checked_too(tmp_path: Path) -> None:
    """A rewritten file starts with an RDB snapshot: a cut tail after it is still a cut (and
    Redis loads the rest), damage inside it is damage from byte 0."""
    import redis

    from tests.service.arena_client import wait_until

    folder = tmp_path / "redis"
    server = EmbeddedRedis(folder)
    client = redis.Redis.from_url(server.start())
    client.set("before", "1")
    client.bgrewriteaof()
    persistence = lambda: client.info("persistence")  # noqa: E731
    wait_until(lambda: not persistence()["aof_rewrite_in_progress"] and not persistence()["aof_rewrite_scheduled"],
               "the rewrite to end")
    with client.pipeline(transaction=True) as pipe:
        pipe.set("after", "2").set("after-too", "3").execute()
    client.close()
    server.stop()
    aof = folder / "appendonly.aof"
    whole = aof.read_bytes()
    assert whole.startswith(b"REDIS"), "the rewrite wrote an RDB preamble"

    start = whole.rindex(MULTI)
    aof.write_bytes(whole[: start + 20])
    check = check_aof(aof)
    assert (check.size, check.good, check.truncated) == (start + 20, start, True), check
    prepare_aof(aof, say=lambda _: None)
    server = EmbeddedRedis(folder)
    client = redis.Redis.from_url(server.start())
    try:
        assert (client.get("before"), client.get("after")) == (b"1", None)
    finally:
        client.close()
        server.stop()

    damaged = bytearray(whole)
    damaged[12] ^= 0xFF  # inside the snapshot, which its checksum guards
    aof.write_bytes(bytes(damaged))
    check = check_aof(aof)
    assert (check.good, check.truncated) == (0, False), check
    with pytest.raises(AofDamaged, match="is damaged at byte 0 of"):
        prepare_aof(aof, say=lambda _: None)
