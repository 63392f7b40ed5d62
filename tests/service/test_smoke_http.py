def test_a_match_against_house_bots_runs_to_its_end(api):
    token, _ = api.register()
    match_id = api.create_match(token, moveTimeoutMs=5000)
    for kind in ("HEURISTIC", "RANDOM", "HEURISTIC"):
        api.add_house_bot(token, match_id, kind)
    match = api.join(token, match_id)
    assert match["status"] == "ACTIVE"
    match = api.play_out(token, match_id, timeout_ms=5000)
    assert match["status"] == "FINISHED"
    assert match["seed"] is not None and match["winners"]
