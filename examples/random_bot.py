"""The smallest bot: a random legal move in every phase.

Run it:  wizard-arena play --token $WIZARD_ARENA_TOKEN --bot examples/random_bot.py:RandomBot
"""

import random

from sdk import Bot


class RandomBot(Bot):
    def choose_trump(self, view):
        return random.choice(view.legal_moves)

    def bid(self, view):
        return random.choice(view.legal_moves)

    def play(self, view):
        return random.choice(view.legal_moves)
