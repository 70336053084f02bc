# Each target creates .venv when missing (torch first: the local CPU wheel), then runs.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.ddtune-installed

.PHONY: test demo lint layout test-integration clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[engine,test]'
	touch $(STAMP)

lint: $(STAMP)
	$(PY) -m ruff check src tests
	$(PY) -m ruff format --check src tests
	$(PY) -m mypy
	$(VENV)/bin/lint-imports --no-cache
	$(PY) tools/import_graph.py --quiet

test: lint
	$(PY) -m pytest -m "not slow and not gpu" -q

layout: $(STAMP)
	$(PY) tools/import_graph.py

test-integration: $(STAMP)
	$(PY) -m pytest -m slow -q

demo: $(STAMP)
	$(VENV)/bin/ddtune demo

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
