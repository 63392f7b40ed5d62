# One venv for everything; `make test` and `make run` set it up on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

# The GraphiQL test drives a real headless browser: Debian's chromium package, installed
# here when it is missing and we may (root with apt-get, as in CI); elsewhere that test is
# skipped and says how to install it. Node clients install their own packages (tests/clients).
CHROMIUM ?= /usr/bin/chromium

.PHONY: setup lint test test-fast test-service run bench clean browser

# Every direct dependency at its lower bound (requirements/lowest.txt): what pyproject.toml
# claims is what the tests run with.
$(BIN)/wizard-arena: pyproject.toml requirements/lowest.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c requirements/lowest.txt -e '.[server,dev]'
	touch $@

setup: $(BIN)/wizard-arena

browser:
	@if [ ! -x $(CHROMIUM) ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -q chromium || { apt-get update -q && apt-get install -y -q chromium; }; \
	fi
	@[ -x $(CHROMIUM) ] || echo "no $(CHROMIUM): the GraphiQL browser test will be skipped (apt-get install chromium)"

# ruff, then mypy: the whole project by pyproject.toml's settings, and the pure packages
# (engine, ranking, contract) with --strict as they ship py.typed
lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/mypy --strict wizard ranking contract

# Two tiers: the fast one (engine, SDK, project files, doctests; no server, under a minute on
# two cores) first, then the service's (real Redis, real processes, real clients).
FAST_TESTS := tests/engine tests/sdk tests/project wizard sdk ranking contract

# Lint and types first (the whole project; the pure packages --strict), then both tiers.
test: lint test-fast test-service

test-fast: setup
	$(BIN)/python -m pytest -n 2 $(FAST_TESTS)

test-service: setup browser
	$(BIN)/python -m pytest tests/service

run: setup
	$(BIN)/wizard-arena up

bench: setup
	$(BIN)/wizard-arena bench engine --ruleset WIZARD --players 4 --seconds 5 --json
	$(BIN)/wizard-arena bench bots --json
	$(BIN)/wizard-arena bench service --seconds 20 --json
	$(BIN)/wizard-arena bench deadlines --json
	$(BIN)/wizard-arena bench tournament --json
	$(BIN)/wizard-arena bench ratings --json

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
