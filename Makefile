# Everything a fresh machine needs: `make run` starts Sparkwire, `make test` runs the suite.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
DATA_DIR ?= ./data

.PHONY: install system-deps java run kafka kafka-fetch spark-archive test lint bench bench-smoke bench-scale-out bench-resume soak clean

# pip shows its progress: a first install downloads PySpark (~400 MB) and takes a minute or two.
# The venv's own pip is enough (PEP 660 editable installs: pip 21.3 and later); no upgrade first.
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# What `make run` needs: the server and the client (client/, a distribution of its own, which
# `sparkwire tail` uses). `make test` adds the test extra.
$(VENV)/.installed-run: pyproject.toml client/pyproject.toml | $(BIN)/python
	$(BIN)/pip install -e ./client -e .
	touch $@

$(VENV)/.installed: pyproject.toml client/pyproject.toml | $(BIN)/python
	$(BIN)/pip install -e ./client -e ".[test]"
	touch $@ $(VENV)/.installed-run

# Nominal's own `nominal` SDK pins older nominal-api and nominal-streaming than ours, so the tests
# that drive it run it from a virtual environment of its own (tests/server/test_nominal_sdk.py).
NOMINAL_VENV ?= .venv-nominal
$(NOMINAL_VENV)/.installed:
	$(PYTHON) -m venv $(NOMINAL_VENV)
	$(NOMINAL_VENV)/bin/pip install "nominal==1.180.1"
	touch $@

install: $(VENV)/.installed $(NOMINAL_VENV)/.installed

# Java, Chromium, redis-server, Prometheus and Maven: apt-get installs them when missing and run as root; otherwise a
# one-line error names the command (.ci/system-deps).
system-deps:
	.ci/system-deps java chromium redis-server prometheus mvn

java:  # what `make run` needs beyond Python, checked before anything is installed
	.ci/system-deps java

# The server, with the demo feed writing synthetic telemetry into it (it waits for the server).
# Only what the server needs is installed (not the test extra, not .venv-nominal): ready sooner.
# The shell becomes the server (exec), so the demo's --stop-with $$ is the server's pid: however the
# server ends (Ctrl+C, a refused start, kill -9), the demo stops within a second.
run: java $(VENV)/.installed-run
	$(BIN)/sparkwire demo --url http://$(HOST):$(PORT) --stop-with $$$$ & \
	exec $(BIN)/sparkwire serve --host $(HOST) --port $(PORT) --data-dir $(DATA_DIR)

# A throwaway single-node Kafka (KRaft) on 127.0.0.1:KAFKA_PORT in the foreground, for `--source kafka`
# (SPARKWIRE_SOURCE=kafka make run, in another terminal). The broker and Spark's Kafka connector are
# fetched with Maven into ~/.cache/sparkwire on first use (deploy/kafka.sh).
KAFKA_PORT ?= 9092
KAFKA_DATA ?= $(DATA_DIR)/kafka
kafka:
	.ci/system-deps java mvn
	deploy/kafka.sh run $(KAFKA_PORT) $(KAFKA_DATA)

kafka-fetch:  # what the Kafka tests need (tests/kafka_broker.py), fetched before the suite runs
	.ci/system-deps mvn
	deploy/kafka.sh fetch

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# Spark's class-data archive for this machine (compute/spark/class_archive.py): ~1 min once, then
# every server and compute process starts sooner (~7 s on an idle machine, 1.6 s in the busy suite).
# Only a speed-up: if it cannot be recorded, the suite still runs (and its archive test says why).
spark-archive: java $(VENV)/.installed
	$(BIN)/sparkwire spark-archive || echo "Spark's class archive not recorded: servers start without it"

test: system-deps install lint kafka-fetch spark-archive
	$(BIN)/pytest -q --durations=40

# Full run (~35 min, writes BENCHMARKS.md); BENCH_ARGS takes NAME=VALUE plan overrides (and --smoke,
# though a smoke run's report would then replace BENCHMARKS.md: use bench-smoke).
bench: install
	$(BIN)/python -m bench.run $(BENCH_ARGS)

# The same harness at a tiny load, so it never rots; not part of `make test`. Its report goes to
# SMOKE_OUT (BENCHMARKS.md stays as the last full run left it).
SMOKE_OUT ?= data/bench-smoke/BENCHMARKS.md
bench-smoke: install
	mkdir -p $(dir $(SMOKE_OUT))
	$(BIN)/python -m bench.run --smoke --out $(SMOKE_OUT) $(BENCH_ARGS)
	$(BIN)/python -m bench.smoke_check $(SMOKE_OUT)

# One compute process and 1, 2, 3 edges, then one all-in-one process, on the Kafka log (~13 min;
# BENCHMARKS.scale-out.md), then 1, 2, 3 sharded compute processes and a SIGKILL (~10 min;
# BENCHMARKS.sharded.md), then the JSON ingest ceiling of the embedded and Kafka logs side by side
# (~8 min; BENCHMARKS.log-ingest.md), then a new computation's back-fill over a followed series,
# kept and not (~3 min; BENCHMARKS.followed.md). BENCH_ARGS (NAME=VALUE overrides) goes to the
# first, SHARDED_ARGS to the second; --smoke in either writes into data/bench-smoke/.
FOLLOWED_OUT = $(if $(findstring --smoke,$(BENCH_ARGS)),--rounds 2 --rate 2 --out data/bench-smoke/followed.md,--out BENCHMARKS.followed.md)
bench-scale-out: install
	$(BIN)/python -m bench.scale_out $(BENCH_ARGS)
	$(BIN)/python -m bench.sharded_compute $(SHARDED_ARGS)
	$(BIN)/python -m bench.log_ingest $(findstring --smoke,$(BENCH_ARGS))
	$(BIN)/python -m bench.followed_backfill $(FOLLOWED_OUT)

# Resume tokens against re-snapshot after a reconnect (~2 min); writes BENCHMARKS.resume.md.
# BENCH_ARGS takes --smoke (into data/bench-smoke/).
bench-resume: install
	$(BIN)/python -m bench.resume $(BENCH_ARGS)

# A server left under a realistic load for 30 minutes (SOAK_ARGS="duration_s=600" for less); writes SOAK.md.
soak: install
	$(BIN)/python -m bench.soak $(SOAK_ARGS)

clean:
	rm -rf $(VENV) $(NOMINAL_VENV) data .pytest_cache .mypy_cache .ruff_cache
