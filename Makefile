# Two venvs, each set up on a fresh machine by the target that needs it: `make test`'s (the
# server at the versions and hashes of requirements/lock.txt, plus the dev tools at their lower
# bounds) and `make run`'s (what running needs only, from the same lock, as the image has).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
RUN_VENV ?= .venv-run
# `make run PORT=9000 HOST=0.0.0.0`
PORT ?= 8000
HOST ?= 127.0.0.1

# The GraphiQL test drives a real headless browser: Debian's chromium package, installed
# here when it is missing and we may (root with apt-get, as in CI); elsewhere that test is
# skipped and says how to install it. Node clients install their own packages (tests/clients).
CHROMIUM ?= /usr/bin/chromium
# The shell starter bot (examples/line_bot.sh) reads its turns with jq: Debian's jq package,
# installed the same way when it is missing (tests/service/test_line_bots.py skips without it).
JQ ?= /usr/bin/jq

.PHONY: setup lint test test-fast test-service test-cluster run bench compiled clean browser jq lock

# The server's whole dependency tree from requirements/lock.txt, hashes checked, as the image
# installs it: what the tests run is what ships. Then the dev tools, every one at its lower
# bound (requirements/lowest.txt, whose server pins are the lock's: tests/project checks both
# files against pyproject.toml), which pip adds without moving anything the lock put in.
$(BIN)/wizard-arena: pyproject.toml requirements/lock.txt requirements/lowest.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --require-hashes -r requirements/lock.txt
	$(BIN)/python -m pip install --quiet -c requirements/lowest.txt -e '.[server,dev]'
	touch $@

setup: $(BIN)/wizard-arena

browser:
	@if [ ! -x $(CHROMIUM) ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -q chromium || { apt-get update -q && apt-get install -y -q chromium; }; \
	fi
	@[ -x $(CHROMIUM) ] || echo "no $(CHROMIUM): the GraphiQL browser test will be skipped (apt-get install chromium)"

jq:
	@if [ ! -x $(JQ) ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -q jq || { apt-get update -q && apt-get install -y -q jq; }; \
	fi
	@[ -x $(JQ) ] || echo "no $(JQ): the shell starter bot's test will be skipped (apt-get install jq)"

# ruff, then mypy: the whole project by pyproject.toml's settings, and the pure packages
# (engine, ranking, contract) with --strict as they ship py.typed
lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/mypy --strict wizard ranking contract

# Two tiers: the fast one (engine, SDK, project files, doctests, the compiled engine against
# the pure one; no server, about a minute on two cores) first, then the service's (real
# Redis, real processes, real clients).
FAST_TESTS := tests/engine tests/sdk tests/project wizard sdk ranking contract

# The service's share that runs again on a Redis Cluster (ARENA_TEST_REDIS=cluster: 3 masters
# with a replica each, RQ's queue on a Redis of its own): what spans keys most (moves, matches
# and their homes, tournaments, ratings, the feed, racing commits), and the files that start a
# cluster of their own (a node killed, a failover, commits waiting for replicas), which run
# in this tier only. A short list, CI's time being tight: on this 2-core machine the whole
# list took 4 min 35 s on the cluster (ratings 78 s, tournaments 64 s, the failover 47 s,
# concurrency 25 s, matches 22 s, subscriptions 20 s, the other two 16 s; measured with the
# issue's branches merged); `make test` grows by about 4 min, as the own files leave
# test-service. test_ratings.py is the one to drop first if CI needs the time.
CLUSTER_OWN_TESTS := tests/service/test_cluster_feed.py tests/service/test_cluster_failover.py tests/service/test_cluster_resharding.py \
	tests/service/test_commit_replicas.py
CLUSTER_TESTS := tests/service/test_matches_http.py tests/service/test_tournaments.py \
	tests/service/test_ratings.py tests/service/test_subscriptions.py tests/service/test_concurrency.py \
	tests/service/test_house_play.py tests/service/test_webhook_dispatchers.py $(CLUSTER_OWN_TESTS)

# Lint and types first (the whole project; the pure packages --strict), then the tiers.
test: lint test-fast test-service test-cluster

test-fast: setup
	$(BIN)/python -m pytest -n 2 $(FAST_TESTS)

# The service tier two files at a time (xdist, --dist loadfile: a module's API processes and
# workers start once, on one worker; each worker has its session's own Redis, database and
# shared API), then alone the files whose timing another file beside them upset: the README's
# blocks (uvicorn kills a `serve --workers` child that misses its 5 s ping, which two files
# at a time on 2 loaded cores made it do) and the slow clients' (a thousand trickles held for
# their 2 s limit while /healthz is probed every 0.25 s). Serially the tier took 13-14 of
# CI's 15 minutes.
SERVICE_SERIAL_TESTS := tests/service/test_readme_commands.py tests/service/test_slow_clients.py

test-service: setup browser jq
	$(BIN)/python -m pytest -n 2 --dist loadfile tests/service $(addprefix --ignore=,$(CLUSTER_OWN_TESTS) $(SERVICE_SERIAL_TESTS))
	$(BIN)/python -m pytest $(SERVICE_SERIAL_TESTS)

# two files at a time too, each worker with a cluster of its own: 2 min 3 s against 3 min 9 s
test-cluster: setup
	ARENA_TEST_REDIS=cluster $(BIN)/python -m pytest -n 2 --dist loadfile $(CLUSTER_TESTS)

$(RUN_VENV)/bin/wizard-arena: pyproject.toml requirements/lock.txt
	$(PYTHON) -m venv $(RUN_VENV)
	$(RUN_VENV)/bin/python -m pip install --quiet --require-hashes -r requirements/lock.txt
	$(RUN_VENV)/bin/python -m pip install --quiet --no-deps -e .
	touch $@

run: $(RUN_VENV)/bin/wizard-arena
	$(RUN_VENV)/bin/wizard-arena up --host $(HOST) --port $(PORT)

# requirements/lock.txt from pyproject.toml's server extra, every file's hash included, by
# pip-tools' pip-compile in a throwaway venv of its own (nothing else needs it)
lock:
	$(PYTHON) -m venv /tmp/wizard-arena-lock
	/tmp/wizard-arena-lock/bin/python -m pip install --quiet pip-tools
	/tmp/wizard-arena-lock/bin/pip-compile --quiet --generate-hashes --allow-unsafe --strip-extras --extra server \
		--no-emit-index-url --no-emit-find-links --output-file requirements/lock.txt pyproject.toml

# The engine as `pip install` compiles it (setup.py: mypyc): the wheel pip builds, unpacked
# into a directory of its own (tests/engine/compiled.py). The editable install stays pure
# Python, so that no compiled module hides an edited source.
# Run it with `PYTHONPATH=$(COMPILED_DIR) .venv/bin/wizard-arena ...` (wizard.COMPILED is then True).
COMPILED_DIR ?= build/compiled

compiled: setup
	$(BIN)/python -m tests.engine.compiled $(COMPILED_DIR)

bench: setup compiled
	$(BIN)/wizard-arena bench engine --ruleset WIZARD --players 4 --seconds 5 --json
	PYTHONPATH=$(COMPILED_DIR) $(BIN)/wizard-arena bench engine --ruleset WIZARD --players 4 --seconds 5 --json
	$(BIN)/wizard-arena bench bots --json
	$(BIN)/wizard-arena bench service --seconds 20 --json
	$(BIN)/wizard-arena bench deadlines --json
	$(BIN)/wizard-arena bench tournament --json
	$(BIN)/wizard-arena bench ratings --json

clean:
	rm -rf $(VENV) $(RUN_VENV) .pytest_cache .hypothesis $(COMPILED_DIR)
