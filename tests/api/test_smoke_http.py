from tests.api.arena_client import first_legal


def test_a_match_against_house_bots_runs_to_its_end(api):
    token, _ = api.register()
    match_id = api.create_match(token, moveTimeoutMs=5000)
    for kind in ("HEURISTIC", "RANDOM", "HEURISTIC"):
        api.add_house_bot(token, match_id, kind)
    match = api.join(token, match_id)
    assert match["status"] == "ACTIVE"
    while match["status"] == "ACTIVE":
        turn = api.data(
            "query($m: ID!) { awaitTurn(matchId: $m, timeoutMs: 5000) { version legalMoves { bid card trump } } }",
            {"m": match_id}, token,
        )["awaitTurn"]
        if turn is None:
            match = api.match(match_id, token)
            continue
        body = api.submit(token, match_id, first_legal(turn), turn["version"])
        assert not body.get("errors"), body
        match = body["data"]["submitMove"]
    assert match["status"] == "FINISHED"
    assert match["seed"] is not None and match["winners"]
