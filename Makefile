# agentwatch — `make run` to try it, `make test` to check it.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
HOST   ?= 127.0.0.1
PORT   ?= 8000

.PHONY: run test lint serve demo migrate clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'
	touch $@ $(VENV)/.installed

SIM_PORT ?= 8001
DEMO_KUBECONFIG := $(CURDIR)/instance/demo-cluster.kubeconfig

## run: install, migrate, seed a demo agent (with a simulated, changing cluster) and an
## admin login, serve on http://$(HOST):$(PORT)/
run: $(VENV)/.installed
	$(BIN)/agentwatch db upgrade
	$(BIN)/agentwatch demo --kubeconfig $(DEMO_KUBECONFIG) --context sim
	$(BIN)/python -m webapp.simcluster --port $(SIM_PORT) --kubeconfig $(DEMO_KUBECONFIG) \
	    --churn & sim=$$!; trap 'kill $$sim 2>/dev/null' EXIT INT TERM; \
	  $(BIN)/agentwatch serve --host $(HOST) --port $(PORT)

## test: install test dependencies and run the whole suite (lint and types included)
test: $(VENV)/.installed-test
	$(BIN)/ruff check webapp tests bench
	$(BIN)/mypy
	$(BIN)/pytest -n 2 -q

lint: $(VENV)/.installed-test
	$(BIN)/ruff check webapp tests bench
	$(BIN)/mypy

migrate: $(VENV)/.installed
	$(BIN)/agentwatch db upgrade

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
