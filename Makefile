# `make demo` and `make test` work on a fresh machine: both create .venv when it is missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# The torch build this project is tested with here; pyproject.toml itself accepts a range.
TORCH_SPEC ?= torch==2.14.1 torchvision==0.29.1

.PHONY: demo test venv clean

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -c "import torch, torchvision" 2>/dev/null || $(PY) -m pip install -q $(TORCH_SPEC)
	$(PY) -m pip install -q -e ".[dev]"
	touch $@

demo: venv
	$(VENV)/bin/ddptrain demo

# Two pytest workers: most tests are real multi-process runs whose start-up (imports) leaves cores idle.
PYTEST_WORKERS ?= 2

test: venv
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile

clean:
	rm -rf runs data/demo .pytest_cache
