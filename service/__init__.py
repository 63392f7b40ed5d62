"""Wizard Arena's service: live matches, bots, tournaments and ratings over GraphQL and a REST
mirror, every piece of live state in Redis. Layers, each importing only those below it:

- ``model``: pure values, no I/O: a live match (the engine's state with its seats, status and
  deadline, changed only by events), a tournament (spec, entrants, tables, results).
- ``store``: Redis, and the only code that knows its keys (``store.keys``): atomic scripts for
  matches, bots and ratings, the tournament store, the process's event feed (pub/sub), the
  pipelined script line, and the embedded Redis server ``wizard-arena up`` starts.
- ``domain``: the use cases: matches (create, join, move, wait), bots (registration,
  authentication), tournaments, ratings, settlement; and ``domain.services``, which wires one
  process's parts together.
- ``api``: the ASGI app: GraphQL (strawberry), the REST mirror, GraphiQL, the HTTP limits.

Beside them, used by all: ``settings`` (the configuration), ``errors`` (one hierarchy, each
error with its API code) and ``metrics``."""
