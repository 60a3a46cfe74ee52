# traceql developer tasks. Everything runs inside a private virtual environment
# (.venv) that this Makefile creates and fills, so a fresh clone needs only
# Python 3.11+ and pip.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
DEMO   := build/demo

.PHONY: demo test bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# Generate a small schema-faithful Nsight Systems export, ingest it, show what
# is in it and the ten longest kernels.
demo: $(STAMP)
	mkdir -p $(DEMO)
	$(PY) -m fixtures.gen_nsys --layout 3 --kernels 2000 --force -q -o $(DEMO)/demo.sqlite
	$(VENV)/bin/traceql --db $(DEMO)/traceql.duckdb ingest $(DEMO)/demo.sqlite
	$(VENV)/bin/traceql --db $(DEMO)/traceql.duckdb info
	$(VENV)/bin/traceql --db $(DEMO)/traceql.duckdb sql \
	  "SELECT name, device_id, stream_id, ts, dur FROM kernel ORDER BY dur DESC, kernel_id LIMIT 10"

test: $(STAMP)
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) build .pytest_cache
