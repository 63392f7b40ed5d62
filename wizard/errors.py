"""The engine's typed errors. Every one is a ``ValueError`` whose message says what to do.

The service maps these, in one place, to the API's error codes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (for the type only: wizard.moves raises these errors)
    from wizard.moves import Move


class WizardError(ValueError):
    """Base of every error the engine raises on bad input."""


class ConfigError(WizardError):
    """A match configuration that cannot be played (bad player count, conflicting variants)."""


class DealError(ConfigError):
    """A stacked deck that is not a valid deal for its round."""


class InvalidMoveError(WizardError):
    """A move that is malformed: no field or two fields set, an unknown card code."""


class NotYourTurnError(WizardError):
    """A well-formed move from a seat that has nothing to do now."""


class MatchFinishedError(NotYourTurnError):
    """A move on a match that is already over."""


class IllegalMoveError(WizardError):
    """A well-formed move that the rules forbid now; ``legal`` lists what would be allowed."""

    def __init__(self, message: str, legal: Sequence[Move] = ()):
        self.legal: tuple[Move, ...] = tuple(legal)
        shown = ", ".join(str(m) for m in self.legal)
        super().__init__(f"{message}; legal moves: {shown}" if shown else message)


class RecordError(WizardError):
    """A serialised state or match record that cannot be read or does not replay."""
