"""The service's use cases, on the stores: matches (``matches``: create, seat, move, wait),
bots (``bots``, ``bot_names``), tournaments (``tournaments``), ratings (``ratings``) and
what an ended match leads to (``settlement``); ``services`` wires one process's parts
together. The API and the workers call this, never the stores."""
