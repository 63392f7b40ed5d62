"""The listing pages: ``/`` (live matches, tournaments, the top of each leaderboard),
``/leaderboard/{ruleset}``, ``/bots/{id}``, ``/tournaments`` and ``/tournaments/{id}``.

Each handler reads what the GraphQL resolvers read (listings, ratings, bots, tournaments) and
shapes it for its template; a match is shown as any spectator sees it (:func:`match_row`: no
result of a sealed match), a rating history as an inline SVG drawn here (:func:`rating_chart`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from markupsafe import Markup, escape
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from service.domain.archiving import places
from service.domain.listings import MatchFilter, check_first, one_of
from service.domain.ratings import RatingMethod, house_kind_of
from service.domain.services import Services
from service.errors import BadInput, NotFound
from service.model.live_match import LiveMatch, MatchStatus, SeatHolder
from service.model.tournament import TournamentStatus
from wizard import Ruleset

if TYPE_CHECKING:
    from service.api.pages.frame import Pages

#: matches listed on the home page (live) and on a bot's page (its latest)
MATCHES_LISTED = 20
#: tournaments per page of /tournaments, and of each status on the home page
TOURNAMENTS_LISTED = 20
#: bots per page of a leaderboard, and of each ruleset's on the home page
LEADERBOARD_PAGE = 50
LEADERS_ON_HOME = 10
#: a tournament page's matches at most (a long tournament's later ones are left out, and said so)
TOURNAMENT_MATCHES_SHOWN = 500
#: the latest points of a bot's rating history its chart draws
CHART_POINTS = 1_000
#: how often a live page reloads itself
REFRESH_SECONDS = 15

RULESETS = [r.value for r in Ruleset]
METHODS = [m.value for m in RatingMethod]
TOURNAMENT_STATUSES = [s.value for s in TournamentStatus]


def routes(pages: Pages) -> list[Route]:
    async def home(request: Request, services: Services) -> Response:
        live = await services.listings.match_page(MatchFilter(status=MatchStatus.ACTIVE.value), MATCHES_LISTED, None)
        running = await services.listings.tournament_page(TournamentStatus.RUNNING.value, TOURNAMENTS_LISTED, None)
        scheduled = await services.listings.tournament_page(TournamentStatus.SCHEDULED.value, TOURNAMENTS_LISTED, None)
        leaders = {
            ruleset: leaderboard_rows(await services.ratings.leaderboard(ruleset, RatingMethod.ELO, LEADERS_ON_HOME, 0))
            for ruleset in RULESETS
        }
        return pages.render(
            "home.html",
            refresh_seconds=REFRESH_SECONDS,
            matches=[match_row(m) for _, m in live.entries],
            tournaments=[t for _, t in running.entries] + [t for _, t in scheduled.entries],
            leaders=leaders,
        )

    async def leaderboard_default(request: Request, services: Services) -> Response:
        return RedirectResponse(f"/leaderboard/{Ruleset.WIZARD.value}", status_code=302)

    async def leaderboard(request: Request, services: Services) -> Response:
        ruleset = request.path_params["ruleset"]
        one_of(ruleset, RULESETS, "ruleset")
        method = one_of(request.query_params.get("method", RatingMethod.ELO.value), METHODS, "method")
        offset = whole_number(request, "offset", 0)
        provisional = one_of(request.query_params.get("provisional", "true"), ["true", "false"], "provisional") == "true"
        # one more than a page: whether a next page exists
        rows = await services.ratings.leaderboard(
            ruleset, RatingMethod(method), LEADERBOARD_PAGE + 1, offset, provisional
        )
        path = f"/leaderboard/{ruleset}"
        hidden = None if provisional else "false"  # the links keep provisional bots left out
        return pages.render(
            "leaderboard.html",
            ruleset=ruleset,
            method=method,
            provisional=provisional,
            provisional_games=services.ratings.provisional_games,
            rows=leaderboard_rows(rows[:LEADERBOARD_PAGE]),
            ruleset_tabs=[
                (r, link(f"/leaderboard/{r}", method=method, provisional=hidden), r == ruleset) for r in RULESETS
            ],
            method_tabs=[(m, link(path, method=m, provisional=hidden), m == method) for m in METHODS],
            provisional_toggle=link(path, method=method, provisional="false" if provisional else None),
            previous=link(path, method=method, provisional=hidden, offset=max(0, offset - LEADERBOARD_PAGE) or None)
            if offset else None,
            next=link(path, method=method, provisional=hidden, offset=offset + LEADERBOARD_PAGE)
            if len(rows) > LEADERBOARD_PAGE else None,
        )

    async def bot(request: Request, services: Services) -> Response:
        bot_id = request.path_params["bot_id"]
        found = await services.bots.get(bot_id)
        if found is None:
            raise NotFound(f"no bot with id {bot_id!r}")
        [elo] = await services.ratings.current([bot_id])
        [fitted] = await services.ratings.fitted([bot_id])
        played = [r["ruleset"] for r in elo]
        histories = await services.ratings.histories([(bot_id, ruleset, CHART_POINTS) for ruleset in played])
        recent = await services.listings.match_page(MatchFilter(bot_id=bot_id), MATCHES_LISTED, None)
        stats = [await services.listings.bot_stats(bot_id, ruleset) for ruleset in RULESETS]
        return pages.render(
            "bot.html",
            bot=found,
            ratings=ruleset_ratings(elo, fitted),
            charts=[
                (ruleset, len(points), rating_chart([(p["at"], p["rating"]) for p in points]))
                for ruleset, points in zip(played, histories, strict=True)
                if points
            ],
            matches=[match_row(m, bot_id) for _, m in recent.entries],
            stats=[s for s in stats if s.matches],
        )

    async def tournaments(request: Request, services: Services) -> Response:
        status = request.query_params.get("status") or None
        after = request.query_params.get("after") or None
        first = check_first(whole_number(request, "first", TOURNAMENTS_LISTED))
        page = await services.listings.tournament_page(status, first, after)
        shown_first = None if first == TOURNAMENTS_LISTED else first
        return pages.render(
            "tournaments.html",
            status_shown=status,
            tournaments=[t for _, t in page.entries],
            status_tabs=[
                (label, link("/tournaments", status=value), value == status)
                for label, value in [("All", None), *((s.title(), s) for s in TOURNAMENT_STATUSES)]
            ],
            first_page=link("/tournaments", status=status, first=shown_first) if after else None,
            next=link("/tournaments", status=status, first=shown_first, after=page.end_cursor) if page.has_next else None,
        )

    async def tournament(request: Request, services: Services) -> Response:
        t = await services.tournaments.get(request.path_params["tournament_id"])
        shown = {m.id: match_row(m) for m in await services.tournaments.matches_of(t, TOURNAMENT_MATCHES_SHOWN, 0)}
        rounds = t.rounds()
        return pages.render(
            "tournament.html",
            refresh_seconds=None if t.status.over else REFRESH_SECONDS,
            tournament=t,
            standings=[(s, t.entrants[s.entrant]) for s in t.standings()],
            rounds=[(number, [(match_id, shown.get(match_id)) for match_id in ids]) for number, ids in rounds],
            matches_left_out=max(0, sum(len(ids) for _, ids in rounds) - TOURNAMENT_MATCHES_SHOWN),
        )

    return [
        Route("/", pages.page(home), methods=["GET"]),
        Route("/leaderboard", pages.page(leaderboard_default), methods=["GET"]),
        Route("/leaderboard/{ruleset}", pages.page(leaderboard), methods=["GET"]),
        Route("/bots/{bot_id}", pages.page(bot), methods=["GET"]),
        Route("/tournaments", pages.page(tournaments), methods=["GET"]),
        Route("/tournaments/{tournament_id}", pages.page(tournament), methods=["GET"]),
    ]


# ---------------------------------------------------------------------- shaping for the templates


@dataclass(frozen=True, slots=True)
class MatchRow:
    """A listed match as any spectator may see it."""

    id: str
    status: str
    ruleset: str
    players: int
    variants: list[str]
    round: int
    rounds: int
    rated: bool
    tournament: str | None
    seats: list[SeatHolder | None]
    #: by seat, once the match has finished and shows its result (None before, after an abort,
    #: and while its duplicate set is still being played: it is sealed)
    scores: list[int] | None
    places: list[int] | None
    #: the seat of the bot whose page lists the match (None: another page)
    bot_seat: int | None = None


def match_row(live: LiveMatch, bot_id: str | None = None) -> MatchRow:
    view = live.view(None)  # a spectator's: a sealed match shows no result
    scores = [s.score for s in view.seats] if view.winners is not None else None
    return MatchRow(
        id=live.id,
        status=live.status.value,
        ruleset=live.ruleset.value,
        players=live.settings.config.players,
        variants=[v.value for v in live.variants],
        round=view.round,
        rounds=view.rounds,
        rated=live.settings.rated,
        tournament=live.settings.tournament,
        seats=list(live.seats),
        scores=scores,
        places=None if scores is None else places(scores),
        bot_seat=live.seat_of(bot_id),
    )


@dataclass(frozen=True, slots=True)
class LeaderboardRow:
    rank: int
    bot_id: str
    name: str
    #: the house bot kind the rating belongs to (None: a registered bot, with a page)
    house: str | None
    rating: float
    games: int
    deviation: float
    provisional: bool


def leaderboard_rows(rows: Sequence[dict[str, Any]]) -> list[LeaderboardRow]:
    return [
        LeaderboardRow(
            r["rank"], r["id"], r["name"], house_kind_of(r["id"]), r["rating"], r["games"], r["deviation"],
            r["provisional"],
        )
        for r in rows
    ]


@dataclass(frozen=True, slots=True)
class MethodRating:
    """One rating of a bot, as the pages show it."""

    rating: float
    games: int
    deviation: float
    provisional: bool


@dataclass(frozen=True, slots=True)
class RulesetRating:
    """A bot's ratings under one ruleset: Elo, and the fit's once a refit has rated it."""

    ruleset: str
    elo: MethodRating | None
    fitted: MethodRating | None


def ruleset_ratings(elo: Sequence[dict[str, Any]], fitted: Sequence[dict[str, Any]]) -> list[RulesetRating]:
    def shown(rows: Sequence[dict[str, Any]]) -> dict[str, MethodRating]:
        return {r["ruleset"]: MethodRating(r["rating"], r["games"], r["deviation"], r["provisional"]) for r in rows}

    by_elo, by_fit = shown(elo), shown(fitted)
    return [
        RulesetRating(ruleset, by_elo.get(ruleset), by_fit.get(ruleset))
        for ruleset in RULESETS
        if ruleset in by_elo or ruleset in by_fit
    ]


def link(path: str, **params: str | int | None) -> str:
    """``path`` with the given query parameters (those that are None left out)."""
    given = {name: value for name, value in params.items() if value is not None}
    return f"{path}?{urlencode(given)}" if given else path


def whole_number(request: Request, name: str, default: int) -> int:
    """A query parameter that is a whole number (``default`` when absent), or BAD_INPUT."""
    given = request.query_params.get(name)
    if given is None or given == "":
        return default
    if not given.isascii() or not given.isdigit() or len(given) > 9:
        raise BadInput(f"{name} must be a whole number from 0, not {given!r}")
    return int(given)


# ---------------------------------------------------------------------- the rating chart

CHART_WIDTH, CHART_HEIGHT = 600, 200
#: room for the rating labels (left) and the date labels (bottom)
CHART_LEFT, CHART_RIGHT, CHART_TOP, CHART_BOTTOM = 48, 8, 10, 24

#: a point of a rating history: (when, ms since the epoch; the rating after it)
ChartPoint = tuple[int, float]


def rating_chart(points: Sequence[ChartPoint]) -> Markup:
    """A rating history as an inline SVG: one polyline vertex per point, oldest first, evenly
    spaced (one per rated match); the lowest and highest rating on the left axis, the first
    and last date under the bottom one (and their times, UTC, when it is one day). Empty
    markup for no point."""
    if not points:
        return Markup("")
    ratings = [rating for _, rating in points]
    low, high = min(ratings), max(ratings)
    # a flat history is drawn across the middle
    bottom, top = (low, high) if high - low >= 1 else (low - 1, high + 1)
    plot_left, plot_right = CHART_LEFT, CHART_WIDTH - CHART_RIGHT
    plot_top, plot_bottom = CHART_TOP, CHART_HEIGHT - CHART_BOTTOM

    def x(index: int) -> float:
        if len(points) == 1:
            return (plot_left + plot_right) / 2
        return plot_left + index * (plot_right - plot_left) / (len(points) - 1)

    def y(rating: float) -> float:
        return plot_bottom - (rating - bottom) * (plot_bottom - plot_top) / (top - bottom)

    vertices = [(x(i), y(rating)) for i, rating in enumerate(ratings)]
    first_day, last_day = _moments(points[0][0], points[-1][0])
    label = f"Rating from {round(ratings[0])} to {round(ratings[-1])} over {len(points)} rated matches"
    parts = [
        f'<svg class="chart" viewBox="0 0 {CHART_WIDTH} {CHART_HEIGHT}" role="img" aria-label="{escape(label)}">',
        f'<line class="axis" x1="{plot_left}" y1="{plot_top}" x2="{plot_left}" y2="{plot_bottom}"/>',
        f'<line class="axis" x1="{plot_left}" y1="{plot_bottom}" x2="{plot_right}" y2="{plot_bottom}"/>',
        f'<text x="{plot_left - 6}" y="{y(high) + 4:.1f}" text-anchor="end">{round(high)}</text>',
        f'<text x="{plot_left - 6}" y="{y(low) + 4:.1f}" text-anchor="end">{round(low)}</text>' if high != low else "",
        f'<text x="{plot_left}" y="{CHART_HEIGHT - 6}">{escape(first_day)}</text>',
        f'<text x="{plot_right}" y="{CHART_HEIGHT - 6}" text-anchor="end">{escape(last_day)}</text>',
        '<polyline class="line" points="' + " ".join(f"{vx:.1f},{vy:.1f}" for vx, vy in vertices) + '"/>',
        f'<circle class="dot" cx="{vertices[-1][0]:.1f}" cy="{vertices[-1][1]:.1f}" r="3"/>',
        "</svg>",
    ]
    return Markup("".join(parts))


def _moments(first_ms: int, last_ms: int) -> tuple[str, str]:
    """The first and last point's labels: their days (UTC), with the time when both fall on one."""
    first, last = (datetime.fromtimestamp(ms / 1000, UTC) for ms in (first_ms, last_ms))
    shown = "%Y-%m-%d %H:%M" if first.date() == last.date() else "%Y-%m-%d"
    return first.strftime(shown), last.strftime(shown)
