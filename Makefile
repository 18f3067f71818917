# The two commands of the README's Quick start: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install demo test lint format lock clean cluster-binaries cluster

$(BIN)/.installed: requirements.lock
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is needed, found " + sys.version.split()[0]'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements.lock
	@touch $@

install: $(BIN)/.installed

# CLUSTER=kubesim (the default: nothing to build) or CLUSTER=kubernetes (the
# real control plane of controlplane/, built from the Go module proxy).
CLUSTER ?= kubesim

demo: install $(if $(filter kubernetes,$(CLUSTER)),cluster-binaries)
	PORTAL_DEMO_CLUSTER=$(CLUSTER) $(BIN)/python -m portal.demo

# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, KWOK and
# kube-state-metrics into ~/.cache/gpu-portal/cluster (PORTAL_CLUSTER_CACHE).
cluster-binaries:
	controlplane/build.sh

# The real control plane with KWOK GPU nodes on 127.0.0.1:$(CLUSTER_PORT), until Ctrl-C.
cluster: install cluster-binaries
	$(BIN)/python -m controlplane

# Three test processes on the two cores: most tests wait on servers and workers
# (tests/conftest.py orders them for it). PYTEST_WORKERS=0 runs them in one.
# The 25 slowest are printed at the end; `pytest -m "not slow"` is the fast loop.
PYTEST_WORKERS ?= 3

test: install lint
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadgroup --no-loadscope-reorder --durations=25

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# Re-pin every dependency after changing pyproject.toml.
lock:
	$(PYTHON) -m venv /tmp/portal-lock-venv
	/tmp/portal-lock-venv/bin/pip install --quiet --upgrade pip
	/tmp/portal-lock-venv/bin/pip install --quiet ".[dev]"
	/tmp/portal-lock-venv/bin/pip freeze --exclude gpu-portal > requirements.lock
	rm -rf /tmp/portal-lock-venv

clean:
	rm -rf $(VENV) var
