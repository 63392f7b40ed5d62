# One venv for everything; `make test` and `make run` set it up on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup test run bench clean

$(BIN)/wizard-arena: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

setup: $(BIN)/wizard-arena

test: setup
	$(BIN)/python -m pytest

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
