"""Profile target for the engine: ``pyinstrument bench/profile_playout.py``.

Plays 3,000 random 4-player WIZARD matches through ``wizard.playout.playout``.
"""

import random

from wizard import MatchConfig, new_match
from wizard.playout import playout

if __name__ == "__main__":
    config = MatchConfig.create("WIZARD", 4)
    rng = random.Random(1)
    for game in range(3000):
        playout(new_match(config, str(game)), rng)
