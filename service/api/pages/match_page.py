"""``/matches/{id}``: a match as a spectator sees it. The page carries the spectator's view
(the same JSON as ``GET /api/matches/{id}`` without a token: no card that is not public), and
``static/match.js`` draws it, follows it live over the ``matchUpdates`` subscription, and once
the match is over steps through its replay (``GET /api/matches/{id}/replay``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from service.api.rest import match_json
from service.domain.services import Services
from service.store.clock import now_ms

if TYPE_CHECKING:
    from service.api.pages.frame import Pages


def routes(pages: Pages) -> list[Route]:
    async def match(request: Request, services: Services) -> Response:
        live = await services.matches.get(request.path_params["match_id"])
        return pages.render(
            "match.html",
            match=live,
            tournament=live.settings.tournament,
            data={"match": match_json(live, None), "serverNowMs": now_ms()},
        )

    return [Route("/matches/{match_id}", pages.page(match), methods=["GET"])]
