"""What a bot author writes: a :class:`Bot` with three methods, each given the seat's view.

A view is the engine's :class:`wizard.MatchView`: the seat's hand, the bids and tricks it
may see, the trick on the table and ``legal_moves``, the moves it may make now. Each method
answers one :class:`wizard.Move`; the SDK sends it. Search bots can turn a view into
playable engine states with :func:`wizard.sample_state` and look ahead.

>>> from wizard import Move
>>> class FirstLegal(Bot):
...     def choose_trump(self, view): return view.legal_moves[0]
...     def bid(self, view): return view.legal_moves[0]
...     def play(self, view): return view.legal_moves[0]
>>> load_bot("random").name, load_bot("heuristic").name
('random', 'heuristic')
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import random
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

from contract import MOVE_DEBUG_MAX_BYTES, utf8_prefix
from wizard import HOUSE_BOTS, MatchView, Move, Phase

if TYPE_CHECKING:
    from sdk.client import Match


#: the most debug text one move carries, UTF-8 bytes (the server's limit: ``submitMove(debug:)``)
DEBUG_MAX_BYTES = MOVE_DEBUG_MAX_BYTES


@dataclass(frozen=True, slots=True)
class Decision:
    """A bot's answer to a turn: the move, and the debug text to keep with it (shown to the
    bot's owner alone, in the match's record: ``submitMove(debug:)``), cut to its first
    :data:`DEBUG_MAX_BYTES` bytes (no character split); empty text is none.

    >>> Decision(Move(bid=1), "é" * 3000).debug == "é" * 2048
    True
    """

    move: Move
    debug: str | None = None

    def __post_init__(self) -> None:
        if not self.debug:
            object.__setattr__(self, "debug", None)
            return
        object.__setattr__(self, "debug", utf8_prefix(self.debug, DEBUG_MAX_BYTES) or None)

    def then(self, later: Decision) -> Decision:
        """``later``'s move with the debug text of both (a turn answered again after a refusal)."""
        return Decision(later.move, "".join(d for d in (self.debug, later.debug) if d) or None)


class Bot:
    """Subclass this and write :meth:`choose_trump`, :meth:`bid` and :meth:`play`.

    The SDK calls :meth:`act`, which picks the method for the view's phase. One bot object
    serves every match its client plays, from a worker thread per decision, so keep
    per-match memory keyed by match (the view has no id; :meth:`act` gets ``match_id``).
    An exception in a method costs only that move: the server makes its fallback move when
    the deadline passes, and the bot goes on playing.
    """

    #: shown in logs and tables; defaults to the class name
    name: str = ""

    def choose_trump(self, view: MatchView) -> Move:
        """The dealer names trump after a Wizard is turned: a ``Move(trump=Suit...)``."""
        raise NotImplementedError(f"{type(self).__name__} does not choose trump")

    def bid(self, view: MatchView) -> Move:
        """A ``Move(bid=n)``: how many tricks this seat will take this round."""
        raise NotImplementedError(f"{type(self).__name__} does not bid")

    def play(self, view: MatchView) -> Move:
        """A ``Move(card=code)``: one of ``view.legal_moves``."""
        raise NotImplementedError(f"{type(self).__name__} does not play")

    def accepts_challenge(self, challenge: dict[str, Any]) -> bool:
        """Whether to accept a challenge that names this bot (``wizard-arena play --challenges
        bot``): the challenge as the API shows it (``challenger``, ``ruleset``, ``players``,
        ``rated``, ``moveTimeoutMs``, ...). Accepts any by default; False declines it."""
        return True

    def act(self, view: MatchView, match_id: str | None = None) -> Move:
        """The move for ``view``, by phase. Override to see ``match_id`` too."""
        if view.phase is Phase.CHOOSE_TRUMP:
            return self.choose_trump(view)
        if view.phase is Phase.BID:
            return self.bid(view)
        return self.play(view)

    def decide(self, match: Match, until: float) -> Decision:
        """The runner's call for each turn: ``match`` is the whole ``Match`` the API answered,
        ``until`` the ``time.monotonic()`` by which to answer. By default :meth:`act` on the
        engine's view, with no debug text; a bot that needs more (the GraphQL fields
        themselves, debug text) overrides this."""
        return Decision(self.act(match.view, match.id))

    def retry(self, match: Match, refused: Move, code: str, message: str, until: float) -> Decision | None:
        """The server refused ``refused`` (``code``, ``message``: ``ILLEGAL_MOVE``, say): another
        move for the same turn, or None to leave the turn to the server's move at the deadline
        (the default: a Python bot that answered an illegal move would answer it again)."""
        return None

    def close(self) -> None:
        """The runner stops: let go of what the bot holds (a program it runs, say)."""

    @property
    def label(self) -> str:
        return self.name or type(self).__name__


class HouseBotPlayer(Bot):
    """One of the engine's house bots (``random``, ``heuristic``, ``search``) behind the SDK's interface."""

    def __init__(self, kind: str, seed: int | None = None) -> None:
        self.name = kind.lower()
        self._policy = HOUSE_BOTS[kind.upper()]()
        self._rng = random.Random(seed)

    def act(self, view: MatchView, match_id: str | None = None) -> Move:
        return self._policy.act(view, self._rng)


class BotSpecError(ValueError):
    """A ``--bot`` value that names no bot; the message says what to write."""


def load_bot(spec: str, seed: int | None = None) -> Bot:
    """The bot a spec names: ``random``, ``heuristic`` or ``search`` (the house bots), ``module:Class``
    (a module importable from the current folder or the environment) or
    ``path/to/file.py:Class`` (which may import modules next to it). The class is built
    with no arguments; ``seed`` seeds the house bots' randomness. Whatever goes wrong is a
    :class:`BotSpecError` that names the spec and, for a failing bot file, where it failed."""
    if spec.upper() in HOUSE_BOTS:
        return HouseBotPlayer(spec, seed)
    where, sep, class_name = spec.rpartition(":")
    if not sep or not where or not class_name:
        raise BotSpecError(f"bot {spec!r}: use heuristic, random, search, module:Class or path/to/file.py:Class")
    try:
        bot_class = getattr(_load_module(spec, where), class_name, None)
        if bot_class is None:
            raise BotSpecError(f"bot {spec!r}: {where} has no {class_name}")
        if not inspect.isclass(bot_class) or not callable(getattr(bot_class, "act", None)):
            raise BotSpecError(f"bot {spec!r}: {class_name} is not a bot class (subclass sdk.Bot)")
        if bot_class is Bot or (
            issubclass(bot_class, Bot)
            and all(getattr(bot_class, m) is getattr(Bot, m) for m in ("choose_trump", "bid", "play", "act"))
        ):
            raise BotSpecError(f"bot {spec!r}: {class_name} writes none of choose_trump, bid, play")
        return cast(Bot, bot_class())
    except BotSpecError:
        raise
    except Exception as e:  # the bot's own code failed: a syntax error, its constructor
        frames = traceback.extract_tb(e.__traceback__)
        at = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
        raise BotSpecError(f"bot {spec!r} failed to load: {type(e).__name__}: {e}{at}") from e


def _load_module(spec: str, where: str) -> ModuleType:
    if where.endswith(".py"):
        path = Path(where).resolve()
        if not path.is_file():
            raise BotSpecError(f"bot {spec!r}: there is no file {where}")
        _importable(path.parent)  # a bot file may import its neighbours
        module_name = f"_wizard_arena_bot_{path.stem}_{abs(hash(str(path)))}"
        module_spec = importlib.util.spec_from_file_location(module_name, path)
        assert module_spec is not None and module_spec.loader is not None
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_name] = module  # dataclasses and pickling look modules up by name
        module_spec.loader.exec_module(module)
        return module
    _importable(Path.cwd())  # as `python -m` would: the installed command does not
    try:
        return importlib.import_module(where)
    except ModuleNotFoundError as e:
        raise BotSpecError(f"bot {spec!r}: cannot import {where}: {e}") from None


def _importable(folder: Path) -> None:
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
