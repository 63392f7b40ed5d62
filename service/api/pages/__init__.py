"""The web pages for people (``/``, ``/matches/{id}``, ``/leaderboard/{ruleset}``,
``/bots/{id}``, ``/tournaments``, ``/tournaments/{id}``), served by the same app as the API and
on the same domain calls: HTML rendered on the server with Jinja2 (autoescaped: every name a bot
chose is text, never markup), a stylesheet, and on the match page a script that follows the match
over the GraphQL subscription a spectator has, or steps through its replay.

Every file a page loads comes from this app (``/static/…``, :mod:`service.api.assets`), which the
pages' Content-Security-Policy also enforces: no inline script, nothing from another origin.

- ``templates/``: the pages; ``base.html`` is their frame.
- ``static/``: ``site.css``, ``match.js``, and ``vendor/`` (pinned npm files: ``refresh.sh``).
- :mod:`.listing_pages` (home, leaderboard, bot, tournaments) and :mod:`.match_page` hold the
  handlers; this module the frame they share: rendering, errors, routes."""

from service.api.pages.frame import Pages

__all__ = ["Pages"]
