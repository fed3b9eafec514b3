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
AGENT_HEALTH_PORT ?= 8002
ACCESS_LOG ?= false
DEMO_KUBECONFIG := $(CURDIR)/instance/demo-cluster.kubeconfig
DEMO_TOKEN := $(CURDIR)/instance/demo-agent-token

## run: install, migrate, seed a demo agent (a simulated, changing cluster reached through
## the agent's tunnel, `agentwatch agent`) and an admin login, serve on http://$(HOST):$(PORT)/
## (the simulator on SIM_PORT, the agent's probes on AGENT_HEALTH_PORT; ACCESS_LOG=true logs
## every request)
run: $(VENV)/.installed
	@$(BIN)/agentwatch db upgrade
	@$(BIN)/agentwatch demo --tunnel
	@AGENTWATCH_ACCESS_LOG=$(ACCESS_LOG) AGENT_HEALTH_PORT=$(AGENT_HEALTH_PORT) \
	  tools/run-demo.sh $(BIN) $(HOST) $(PORT) $(SIM_PORT) $(DEMO_KUBECONFIG) $(DEMO_TOKEN) \
	  $(CURDIR)/instance/demo-admin-password

# No module may import itself through others (tools/import_cycles.py says what counts).
IMPORT_CYCLES := tools/import_cycles.py webapp simkube

## test: install test dependencies and run the whole suite (lint and types included)
test: $(VENV)/.installed-test
	$(BIN)/ruff check webapp simkube tests bench tools
	$(BIN)/python $(IMPORT_CYCLES)
	$(BIN)/mypy
	@# The identity tests' OpenID Connect provider: built from its Go module once (cached by
	@# version), so a developer's run signs in through it too; without Go they skip.
	AGENTWATCH_OIDC_PROVIDER_BIN="$${AGENTWATCH_OIDC_PROVIDER_BIN:-$$(bash tests/oidc/build.sh | tail -1)}" \
	  $(BIN)/pytest -n 2 -q

lint: $(VENV)/.installed-test
	$(BIN)/ruff check webapp simkube tests bench tools
	$(BIN)/python $(IMPORT_CYCLES)
	$(BIN)/mypy

migrate: $(VENV)/.installed
	$(BIN)/agentwatch db upgrade

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
