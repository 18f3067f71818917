# The two commands of the README's Quick start: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install demo test lint format lock clean

$(BIN)/.installed: requirements.lock
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is needed, found " + sys.version.split()[0]'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements.lock
	@touch $@

install: $(BIN)/.installed

demo: install
	$(BIN)/python -m portal.demo

test: install lint
	$(BIN)/pytest

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
