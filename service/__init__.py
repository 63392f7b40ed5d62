"""Wizard Arena's service: the ``wizard-arena`` command (and, to come, the API)."""
