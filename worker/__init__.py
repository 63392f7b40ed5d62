"""Background work on Redis: the deadline sweeper (the clock of every match) and the RQ
worker that runs scheduled jobs."""
