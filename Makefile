# `make demo` and `make test` work on a fresh machine: both create .venv when it is missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# The torch build this project is tested with here; pyproject.toml itself accepts a range.
TORCH_SPEC ?= torch==2.14.1 torchvision==0.29.1

.PHONY: demo test test-fast test-hour check venv clean

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml setup.py src/ddptrain/data/_jpegregion.c
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -c "import torch, torchvision" 2>/dev/null || $(PY) -m pip install -q $(TORCH_SPEC)
	$(PY) -m pip install -q -e ".[dev]"
	touch $@

demo: venv
	$(VENV)/bin/ddptrain demo

# Two pytest workers: most tests are real multi-process runs whose start-up (imports) leaves cores idle. The 25
# slowest tests are listed at the end, to keep the whole run short.
PYTEST_WORKERS ?= 2

test: venv
	bash scripts/install-chromium.sh
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile --durations=25

# The unit tests only (no multi-process runs): well under a minute.
test-fast: venv
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile -m "not slow"

# The default recipe at the default size (224 px) on make-dataset's data: about an hour on 2 CPU cores, so not part
# of `make test` (which checks the same recipe at 64 px).
test-hour: venv
	DDPTRAIN_HOUR_TESTS=1 $(PY) -m pytest -q tests/e2e/test_default_recipe_e2e.py -k default_size

# Lint, formatting and types: what keeps the code base readable.
check: venv
	$(VENV)/bin/ruff check src tests examples benchmarks
	$(VENV)/bin/ruff format --check src tests examples benchmarks
	$(VENV)/bin/mypy

clean:
	rm -rf runs data/demo .pytest_cache
