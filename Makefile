# Two entry points on a fresh machine: `make demo` (the main job) and `make test` (the suite).
# Each installs what it needs into .venv on first use, and shows the install's progress.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# Not quiet: a first install downloads and builds for minutes without a wheel cache, so pip
# shows each step (and its download bars on a terminal).
PIP := $(PY) -m pip install --disable-pip-version-check

.PHONY: test test-pure test-cluster test-rocketmq rocketmq-deps test-all test-newest-trio demo lint docs wheel-check bench bench-deps charts clean

$(VENV)/.created:
	@echo "== creating $(VENV) with $$($(PYTHON) --version)"
	$(PYTHON) -m venv $(VENV)
	@touch $@

# The demo needs the package and its spark extra (pyspark, pyarrow, pandas), nothing else.
$(VENV)/.installed-demo: pyproject.toml $(VENV)/.created
	@echo "== installing trio-remoting with the spark extra (pyspark is about 400 MB: a minute or two)"
	$(PIP) -e '.[spark]'
	@touch $@

# The suite also needs the test tools, the linters, and grpcio for the RPC bench's baseline.
$(VENV)/.installed-dev: pyproject.toml $(VENV)/.created
	@echo "== installing trio-remoting with the spark, test and dev extras (a few minutes)"
	$(PIP) -e '.[spark,dev]'
	@touch $@ $(VENV)/.installed-demo

$(VENV)/.installed-docs: pyproject.toml $(VENV)/.installed-dev
	@echo "== installing the docs tools (sphinx, furo, myst-parser)"
	$(PIP) -e '.[docs]'
	@touch $@

# The compiled fast path (codec/_speedups.c, remoting/_core/_receiving/_speedups.c): an editable
# install builds it in place; rebuilt here when a source changed since (a machine without a C
# compiler says so in one line and runs the pure-Python package, which CI also tests: make
# test-pure).
SPEEDUPS := codec/_speedups.c remoting/_core/_receiving/_speedups.c
$(VENV)/.compiled: $(SPEEDUPS) hatch_build.py $(VENV)/.installed-dev
	-$(PY) hatch_build.py
	@$(PY) -c "import codec._native as n; print('== trio-remoting codec:', n.STATUS)"
	@touch $@

# Two worker processes (pytest-xdist; the tests that share the SparkSession run in one of
# them; TEST_WORKERS=0 runs them in this process), a line per finished test file, and the
# slowest tests at the end.
TEST_WORKERS ?= 2
test: $(VENV)/.installed-dev $(VENV)/.compiled
	$(PY) -m pytest -m "not slow and not cluster and not rocketmq" -q -n $(TEST_WORKERS) \
		--dist loadgroup --durations=15

# The core's tests (codec, processors, transport) on the pure-Python package: the compiled
# fast path left out at run time (make test runs everything with it, where it was built).
test-pure: $(VENV)/.installed-dev
	TRIO_REMOTING_PURE_PYTHON=1 $(PY) -m pytest -m "not slow and not cluster and not rocketmq" \
		-q -n $(TEST_WORKERS) --dist loadgroup \
		tests/codec tests/processors tests/remoting

# A Spark standalone cluster (Master + Worker JVMs) calling fleets of servers, with the
# death tests and a streaming query over a real RocketMQ broker (RMQ_HOME, below); the first
# run also builds the executors' packed virtualenv (~40 s).
test-cluster: $(VENV)/.installed-dev rocketmq-deps
	RMQ_HOME="$(RMQ_HOME)" $(PY) -m pytest -m cluster -q

# A real RocketMQ 4.9.8 cluster (name server + brokers, JVMs on free ports) and Java's own
# client from its jar (tests/rocketmq/). RMQ_HOME: the broker folder (README.md), by default
# ../shared/rocketmq-broker beside this checkout (or beside the main one, for a worktree),
# whose install-deps.sh installs the Debian jars it runs on (idempotent; retried while
# another apt-get holds the lock).
RMQ_HOME ?= $(abspath $(firstword $(wildcard ../shared/rocketmq-broker \
	$(shell git rev-parse --git-common-dir 2>/dev/null)/../../shared/rocketmq-broker) \
	../shared/rocketmq-broker))

rocketmq-deps:
	@if [ -x "$(RMQ_HOME)/install-deps.sh" ]; then \
	  for i in 1 2 3 4 5 6; do "$(RMQ_HOME)/install-deps.sh" && break; \
	    [ $$i = 6 ] && exit 1; echo "== install-deps.sh failed (apt busy?): again in 20 s"; \
	    sleep 20; done; fi

test-rocketmq: $(VENV)/.installed-dev rocketmq-deps
	RMQ_HOME="$(RMQ_HOME)" $(PY) -m pytest -m rocketmq -q

test-all: $(VENV)/.installed-dev
	$(PY) -m pytest -q

# The core's tests against the newest trio on PyPI, in a virtualenv of their own: async
# processors' first step relies on how trio's runner drives a task's coroutine (not public),
# so a trio release that changes it shows here first (the library itself falls back to the
# public path and logs first_step.disabled; the probe's test fails loudly).
NEWEST_TRIO := .venv-newest-trio
test-newest-trio:
	@test -x $(NEWEST_TRIO)/bin/python || $(PYTHON) -m venv $(NEWEST_TRIO)
	$(NEWEST_TRIO)/bin/python -m pip install --disable-pip-version-check -q -e '.[test]'
	$(NEWEST_TRIO)/bin/python -m pip install --disable-pip-version-check -q --upgrade trio
	@$(NEWEST_TRIO)/bin/python -c "import trio, codec._native as n; print('== trio', trio.__version__, '; codec:', n.STATUS)"
	$(NEWEST_TRIO)/bin/python -m pytest -m "not slow and not cluster and not rocketmq" -q -p no:cacheprovider \
		tests/codec tests/processors tests/remoting --ignore=tests/remoting/bus

demo: $(VENV)/.installed-demo
	$(PY) -m remoting demo

lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check codec processors remoting tests bench examples docs
	$(VENV)/bin/mypy

# The docs site, warnings as errors, after a check of every link and every mention of a page
# (docs/check_links.py); open docs/_build/html/index.html.
docs: $(VENV)/.installed-docs
	$(PY) docs/check_links.py
	$(PY) -m sphinx -W --keep-going -b html -q docs docs/_build/html

# Build the sdist and the wheel, install the wheel into a clean venv, use it from outside the
# checkout: what a user gets from PyPI.
wheel-check: $(VENV)/.installed-dev
	bash .ci/wheel-check

# The benchmarks' peers: Debian's redis-server (bench/queue.py) and nats-server (bench/bus.py),
# which the benchmarks start on a free port of 127.0.0.1 and stop (root installs them;
# redis-py, hiredis and nats-py come with the dev extra). Tests and CI need neither.
bench-deps:
	@command -v redis-server >/dev/null || { apt-get update -q && apt-get install -y -q redis-server; }
	@command -v nats-server >/dev/null || { apt-get update -q && apt-get install -y -q nats-server; }

# The figures of docs/performance.md and docs/scaling.md, as JSON in bench/results/ (~30 min).
bench: $(VENV)/.installed-dev bench-deps
	-$(PY) bench/codec.py
	$(PY) bench/rpc.py --json bench/results/rpc.json
	$(PY) bench/queue.py --json bench/results/queue.json
	$(PY) bench/bus.py --json bench/results/bus.json
	$(PY) bench/spark.py --json bench/results/spark.json
	$(PY) bench/spark_stream.py --json bench/results/spark_stream.json
	$(PY) bench/workers.py --json bench/results/workers.json
	$(PY) bench/cluster.py --json bench/results/cluster.json

# Redraw docs/images/*.png from the benchmarks' JSON (bench/results/).
charts: $(VENV)/.installed-docs
	$(PY) bench/charts.py

clean:
	rm -rf $(VENV) $(NEWEST_TRIO) .cache .pytest_cache .mypy_cache .ruff_cache docs/_build dist build
	rm -f $(SPEEDUPS:.c=.*.so) $(SPEEDUPS:.c=.*.pyd)
