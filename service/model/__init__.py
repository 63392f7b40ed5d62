"""The service's values, pure and without I/O: a live match (the engine's state with its seats,
deadline and status, changed only by events) and a tournament (its spec, entrants, tables
and results). The store persists them; the domain works with them."""
