"""The ``wizard-arena`` command: the service's processes (``up``, ``serve``, ``worker``), the
bot author's commands (``sdk.cli``) and the benchmarks (``bench``). It sits above every
other package and imports them; nothing imports it."""
