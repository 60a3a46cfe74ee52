# traceql developer tasks. Everything runs inside a private virtual environment
# (.venv) that this Makefile creates and fills, so a fresh clone needs only
# Python 3.11+ and pip.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
CORE   := $(VENV)/.installed-core
DEMO   := build/demo

.PHONY: demo test docs bench bench-scaling bench-small bench-kineto bench-spark bench-spark-ingest fuzz clean

# Everything the tests need (the test and spark extras: pyspark for tests/engines/test_spark.py).
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,spark]'
	touch $(STAMP) $(CORE)

# What the demo needs: traceql and its plot extra, not pyspark (half the size of the test venv).
$(CORE): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[plot]'
	touch $(CORE)

# Generate a small schema-faithful Nsight Systems export, ingest it, show what
# is in it, the overview (summary) and the ten kernels with the most GPU time.
demo: $(CORE)
	mkdir -p $(DEMO)
	$(PY) -m fixtures.gen_nsys --layout 3 --kernels 2000 --force -q -o $(DEMO)/demo.sqlite
	$(VENV)/bin/traceql --db $(DEMO)/traceql.duckdb ingest $(DEMO)/demo.sqlite
	$(VENV)/bin/traceql --db $(DEMO)/traceql.duckdb info
	$(VENV)/bin/traceql --db $(DEMO)/traceql.duckdb summary --limit 5
	$(VENV)/bin/traceql --db $(DEMO)/traceql.duckdb report --by kernel --limit 10

# The suite on two processes, a test file's tests in one of them (module fixtures built once);
# the 25 slowest tests are listed at the end.
test: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadfile --durations=25

# Write the generated references docs/commands.md (every command's --help) and docs/contract.md
# (schemas/contract); tests/project/test_docs.py fails when the committed files differ.
docs: $(STAMP)
	$(PY) docs/generate.py

# Ingest 300 damaged copies of the real exports in ../shared/traces through the CLI, run 200
# hostile `traceql sql` queries and 100 workspace faults; every one must be a clean result or a
# one-line error, nothing written or read without asking (tests/fuzz.py). Several minutes.
fuzz: $(STAMP)
	$(PY) -m tests.fuzz --variants 300 --sql 200 --faults 100 --wave 150 --hostile 160 --seed 1 --jobs 2 --markdown tests/FUZZ.md

# Benchmarks (bench/run.py): generated S and M inputs by default, `make bench SIZES="S M ATTR"`
# for 16 M NVTX ranges, add L (10 M kernels, several GB) on request. Installs nsys-ai from
# PyPI into its own venv under bench/data/ (never into .venv), waits until the 1-minute load
# average is below BENCH_LOAD (at most BENCH_WAIT s), writes bench/RESULTS.md.
SIZES      ?= S M
BENCH_LOAD ?= 1.5
BENCH_WAIT ?= 1200
bench: $(STAMP)
	$(PY) bench/run.py --sizes $(SIZES) --setup-nsys-ai --wait-load $(BENCH_LOAD) --wait-max $(BENCH_WAIT) \
	  --out bench/RESULTS.md --json bench/data/results.json

# Ingest time per kernel on PyTorch-shaped input (fixtures/gen_torch.py) at 0.25, 0.5, 1, 2 and
# 4 M kernels, against the SQLite scan floor; writes bench/SCALING.md (bench/scaling.py).
bench-scaling: $(STAMP)
	$(PY) bench/scaling.py --wait-load $(BENCH_LOAD) --wait-max $(BENCH_WAIT)

# Everyday traces (bench/small.py): ingest, start-up and every report as commands on the three
# largest real exports in ../shared/traces, next to nsys-ai (its venv from `make bench`) and
# SQLite; writes bench/SMALL.md.
bench-small: $(STAMP)
	$(PY) bench/small.py --runs 5 --wait-load $(BENCH_LOAD) --out bench/SMALL.md --json bench/data/small.json

# PyTorch profiler (Kineto) JSON (bench/kineto.py): a generated trace of 1 M kernels, ingest time and
# peak memory against parsing the JSON alone (msgspec, orjson, json, ijson, DuckDB) and HTA's loader
# (HolisticTraceAnalysis from PyPI in its own venv under bench/data/); writes bench/KINETO.md.
bench-kineto: $(STAMP)
	$(PY) bench/kineto.py --setup-parsers --setup-hta --wait-load $(BENCH_LOAD) --wait-max $(BENCH_WAIT) \
	  --json bench/data/kineto.json

# Apache Spark next to DuckDB (bench/spark.py): 16, 32 and 64 generated ranks of 8,000 kernels
# ingested per rank in parallel processes into one partitioned Parquet export, every report on
# Spark local[2] and on DuckDB (time, CPU, peak memory, same rows), and one 1 M-kernel trace;
# writes bench/SPARK.md. Needs the spark extra and Java 17.
bench-spark: $(STAMP)
	$(PY) bench/spark.py --jvm-variants

# ingest --engine spark of 64 generated ranks of 2,000 kernels on local[1] and local[2] against
# ingest -j 2 + export --partition-by trace (bench/spark_ingest.py): wall, CPU of every process,
# peak memory, the exports compared; writes its section of bench/SPARK.md.
bench-spark-ingest: $(STAMP)
	$(PY) bench/spark_ingest.py --ranks 64 --kernels-per-rank 2000

clean:
	rm -rf $(VENV) build .pytest_cache
