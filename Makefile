# One entry point for people and CI alike.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: system-deps dev lock check lint typecheck imports crd crd-check reference test test-unit envtest scan clean

system-deps: ## Debian packages some tests use (tmux, postgresql, wrk); needs root
	scripts/install-system-deps

dev: ## create .venv: exactly the versions in requirements-dev.lock, then the project itself
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --require-hashes --no-deps -r requirements-dev.lock
	$(BIN)/pip install --quiet --no-deps -e .
	$(BIN)/pip check

lock: ## resolve the newest versions pyproject.toml allows into requirements{,-dev}.lock
	scripts/lock

check: ## everything CI runs: lint, types, layers, CRD and reference drift, tests (ARGS go to pytest)
	scripts/check $(ARGS)

lint:
	$(BIN)/ruff check runtime operator tests scripts
	$(BIN)/ruff format --check .

typecheck:
	$(BIN)/mypy

imports:
	$(BIN)/lint-imports

crd: ## regenerate crds/application.yaml from the pydantic models
	$(BIN)/python -m mas.infra.crd > crds/application.yaml

crd-check:
	$(BIN)/python -m mas.infra.crd --check crds/application.yaml

reference: ## regenerate docs/reference/ (Application fields, Helm values, mas-ctl) from their sources
	$(BIN)/python -m mas.reference.application > docs/reference/application.md
	$(BIN)/python -m mas.reference.helm_values > docs/reference/helm-values.md
	$(BIN)/python -m mas.reference.cli > docs/reference/cli.md

test:
	$(BIN)/pytest

test-unit: ## tests/unit without the integration ones: no sockets, subprocesses or servers
	$(BIN)/pytest tests/unit -m "not integration"

envtest: ## build etcd, kube-apiserver and kube-controller-manager once into a cache
	scripts/build-envtest

scan: ## checkov and kube-score over the chart and rendered children (builds them once: scripts/build-scanners)
	MAS_SCANNERS_DIR="$$(scripts/build-scanners | tail -n 1)" MAS_REQUIRE_SCANNERS=1 $(BIN)/pytest tests/scanners

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
