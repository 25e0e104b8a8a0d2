# Two commands for a newcomer: `make demo` and `make test`.
# Both create .venv in the repo root when it is missing and install the project into it.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

export PYSPARK_PYTHON := $(abspath $(BIN)/python)
export PYSPARK_DRIVER_PYTHON := $(abspath $(BIN)/python)
export SPARK_LOCAL_IP := 127.0.0.1

.PHONY: demo test test-slow test-soak test-bench test-compat test-connect test-cluster test-compose lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet --upgrade pip
	@# compat: a plain path on sys.path, so pyspark finds the top-level pyspark_ordered_agg module
	PYTHONWARNINGS=ignore $(BIN)/pip install --quiet -e ".[test,bench,connect]" --config-settings editable_mode=compat
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/spark-stream-sched demo

# The default run (about 17 min on 2 cores, two pytest workers): everything but the tests marked
# slow, and the Spark Connect tests (they need a pytest process of their own: make test-connect);
# the compatibility suite's doors on the checkout's pyspark included.
test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadfile -m "not slow and not connect"

# The long checks: real processes SIGKILLed at named points and restarted, in-process crash
# points, damaged and full-disk state, the state locations' retention, the README's job run
# three ways, its sink and ordered() examples and its keyed examples (the README's demo, source
# example and CLI stay in `make test`), a user's own builder, on two pytest workers. CI runs them after `make test`; the soak and the
# random-kill campaigns are `make test-soak`, the bench smoke runs `make test-bench`.
test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadfile -m "slow and not bench and not soak"

# The soak (120 source and 30 sink micro-batches, the driver SIGKILLed twice in each), the
# random-kill campaigns (seeded kills at random crash points and delays; the seed is printed)
# and the SIGKILL variants beyond the one per door that `make test-slow` keeps (the CLI job,
# a keyed pipeline, a window after a spilling join, the sink's first and final commits, a late
# file failed or skipped after a crash): about 15 min on two workers, outside CI's hour
# (docs/soak.md).
test-soak: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadfile -m soak

# The bench smoke runs: each bench command end to end on small sizes (about 12 min).
test-bench: $(STAMP)
	$(BIN)/python -m pytest -q -m bench

# Every door on every supported pyspark line (4.0 to 4.3), each in a fresh venv (under the
# system's temporary directory) with the wheel built from the working tree installed into it as a
# user would; the rows must agree across the lines. About 3.5 min per line once pip's cache
# holds the pyspark wheels, COMPAT_JOBS lines at a time (tests/spark/compat/lines.py).
COMPAT_LINES ?= 4.0.5,4.1.4,4.2.1,4.3.0
COMPAT_JOBS ?= 2
test-compat: $(STAMP)
	$(BIN)/python -m tests.spark.compat.lines --lines $(COMPAT_LINES) --jobs $(COMPAT_JOBS)

# A real Spark Connect server started from the installed pyspark, used from a Connect client
# (docs/connect.md); a pytest process of its own, since a process is either classic or Connect.
test-connect: $(STAMP)
	$(BIN)/python -m pytest -q -m connect tests/connect

# Real Spark standalone cluster (master + 2 workers started from the installed pyspark).
test-cluster: $(STAMP)
	$(BIN)/python -m pytest integration -q -m "cluster and not compose"

# The same tests on the docker-compose cluster (needs root: installs Docker and debootstrap
# from Debian's packages when they are missing, starts dockerd if none runs).
test-compose: $(STAMP)
	command -v dockerd >/dev/null && command -v docker-compose >/dev/null \
		&& command -v debootstrap >/dev/null || (apt-get update -q \
		&& DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io docker-compose debootstrap)
	$(BIN)/python -m pytest integration -q -m compose

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/spark-stream-sched bench all

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
