"""Profile target for the engine: ``pyinstrument bench/profile_playout.py``.

Plays 3,000 random 4-player WIZARD matches through ``MatchState.playout``.
"""

import random

from wizard import MatchConfig, new_match

if __name__ == "__main__":
    config = MatchConfig.create("WIZARD", 4)
    rng = random.Random(1)
    for game in range(3000):
        new_match(config, str(game)).playout(rng)
