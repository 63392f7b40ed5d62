"""Ranking bots, with no I/O and no dependency beyond the standard library: who meets whom
(``ranking.pairing``: round-robin and Swiss tables, seat rotation, placement points) and how
strong each is (``ranking.ratings``: multiplayer Elo and the fit of a whole history). The
service's tournaments and the SDK's local tournaments both use it."""
