"""Bot specs: what `--bot` accepts, and a clear error for everything else."""

from __future__ import annotations

import pytest

from sdk import Bot, BotSpecError, HouseBotPlayer, load_bot
from wizard import MatchConfig, new_match


def test_house_bots_play_legal_moves():
    state = new_match(MatchConfig.create("WIZARD", 3), seed="spec")
    for spec in ("heuristic", "RANDOM"):
        bot = load_bot(spec, seed=1)
        assert isinstance(bot, HouseBotPlayer)
        view = state.view(state.awaiting()[0])
        assert bot.act(view, "m1") in view.legal_moves


def test_a_file_bot_may_import_its_neighbours(tmp_path):
    (tmp_path / "helpers.py").write_text("def first(view):\n    return view.legal_moves[0]\n")
    (tmp_path / "mine.py").write_text(
        "from sdk import Bot\nfrom helpers import first\n\n"
        "class Mine(Bot):\n    def bid(self, view):\n        return first(view)\n"
    )
    bot = load_bot(f"{tmp_path / 'mine.py'}:Mine")
    view = new_match(MatchConfig.create("WIZARD", 3), seed="spec").view(1)
    assert bot.act(view, None) == view.legal_moves[0]


def test_a_module_bot_is_found_in_the_current_folder(tmp_path, monkeypatch):
    (tmp_path / "cwd_bot_module.py").write_text("from sdk import Bot\n\nclass B(Bot):\n    def play(self, view):\n        return view.legal_moves[0]\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", [p for p in __import__("sys").path if p not in ("", str(tmp_path))])
    assert isinstance(load_bot("cwd_bot_module:B"), Bot)


@pytest.mark.parametrize(
    ("source", "spec_tail", "message"),
    [
        ("def broken(:\n", "broken.py:X", "SyntaxError"),
        ("from sdk import Bot\nclass X(Bot):\n    def __init__(self, needed):\n        pass\n    def bid(self, view):\n        pass\n",
         "needs.py:X", "TypeError"),
        ("class X:\n    pass\n", "notabot.py:X", "is not a bot class"),
        ("from sdk import Bot\nclass X(Bot):\n    pass\n", "empty.py:X", "writes none of"),
        ("from sdk import Bot\n", "missing.py:X", "has no X"),
    ],
)
def test_a_bot_that_cannot_be_loaded_is_named_with_the_reason(tmp_path, source, spec_tail, message):
    path = tmp_path / spec_tail.partition(":")[0]
    path.write_text(source)
    with pytest.raises(BotSpecError, match=message) as caught:
        load_bot(f"{path}:X")
    assert str(path) in str(caught.value)


@pytest.mark.parametrize("spec", ["sdk:Bot", "nowhere_module_xyz:Bot", "no-colon", "gone.py:Bot"])
def test_specs_that_name_no_bot(spec):
    with pytest.raises(BotSpecError, match=spec.partition(":")[0]):
        load_bot(spec)


def test_play_ladder_option_names_a_ruleset_and_players():
    from sdk.runner import parse_ladder

    assert parse_ladder("wizard_junior:3") == ("WIZARD_JUNIOR", 3)
    for bad in ("WIZARD", "WIZARD:", "WIZARD:four", ":4"):
        with pytest.raises(ValueError, match="RULESET:PLAYERS"):
            parse_ladder(bad)
