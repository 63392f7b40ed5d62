"""``python -m wizard_arena``: the ``wizard-arena`` command."""

from wizard_arena.cli import main

main()
