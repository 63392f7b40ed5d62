"""Everything the service keeps in Redis, and the only code that knows how: key and channel
names (``keys``), the scripts and stores of matches (``matches``), bots (``bots``), ratings
(``ratings``) and tournaments (``tournaments``), the process's feed of published events
(``feed``), the pipelined connection of the move path (``script_line``), the clock
(``clock``) and the embedded Redis server (``embedded_redis``)."""
