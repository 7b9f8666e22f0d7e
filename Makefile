# flashsale — every command a user needs. `make help` lists them.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: help install install-test lock up down status docs demo race compare compare-hot compare-opening compare-payment profile scenario scenarios chaos test lint check clean bench-redis-locks bench-gate bench-metrics bench-servers bench-capacity bench-reads bench-race-watch bench-checker bench-buyers bench-window bench-room verdicts

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-13s %s\n", $$1, $$2}'

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.runtime: requirements.txt | $(VENV)/bin/python
	$(PY) -m pip install -q --disable-pip-version-check --require-hashes -r requirements.txt
	touch $@

$(VENV)/.dev: requirements.txt requirements-dev.txt | $(VENV)/bin/python
	$(PY) -m pip install -q --disable-pip-version-check --require-hashes -r requirements-dev.txt
	touch $(VENV)/.runtime $@

install:  ## Debian packages (servers, headers) and the virtualenv, whatever is missing
	scripts/install-system-packages.sh
	$(MAKE) --no-print-directory $(VENV)/.runtime

install-test:
	scripts/install-system-packages.sh --test
	$(MAKE) --no-print-directory $(VENV)/.dev

# uv compiles the requirements: installed by this target alone (no requirements file lists it).
UV_VERSION := 0.13.9
LOCK := $(PY) -m uv pip compile -q --generate-hashes --python-version 3.11 --universal --custom-compile-command "make lock"

lock: | $(VENV)/bin/python  ## compile requirements*.in into the hashed, fully pinned requirements*.txt
	$(PY) -m pip install -q --disable-pip-version-check uv==$(UV_VERSION)
	$(LOCK) requirements.in -o requirements.txt
	$(LOCK) requirements-dev.in -o requirements-dev.txt
	$(LOCK) requirements-bench.in -o requirements-bench.txt

up: install  ## start the stack: MariaDB, Redis, ZooKeeper, INSTANCES x gunicorn, nginx on :8080
	$(PY) -m stack up

down:  ## stop exactly the processes `up` started, by PID
	@if [ -x $(PY) ]; then $(PY) -m stack down; else echo "not running"; fi

status:  ## state, PID and health of each server
	$(PY) -m stack status

demo: up  ## the burst under each strategy (the oversell table), then one round of the comparison
	$(PY) -m loadtest.demo
	$(PY) -m loadtest.compare --rounds 1 $(COMPARE_ARGS)
	@echo "The stack is still up: open http://127.0.0.1:$${NGINX_PORT:-8080}/ to buy, and"
	@echo "http://127.0.0.1:$${NGINX_PORT:-8080}/race to race the strategies live (or 'make race');"
	@echo "The sale, live: http://127.0.0.1:$${NGINX_PORT:-8080}/dashboard; Prometheus, scraping every process:"
	@echo "http://127.0.0.1:$${METRICS_PORT:-9390}/ (alerts: /alerts). 'make down' stops it all."

race: up  ## every strategy against the same buyers at once, with a progress bar and the table (STRATEGIES=a,b)
	$(PY) -m loadtest.race $(if $(STRATEGIES),--strategies $(STRATEGIES)) $(RACE_ARGS)

# The correct strategies (the payment mode's default).
PAYMENT_STRATEGIES := setnx,redisson,redisson-fair,zookeeper,mysql,mysql-for-update,optimistic,atomic,gate

compare: up  ## Locust against every strategy (STRATEGIES=a,b to choose): report in reports/<time>/
	$(PY) -m loadtest.compare $(if $(STRATEGIES),--strategies $(STRATEGIES)) $(COMPARE_ARGS)

compare-hot: up  ## every request buys one hot product, beside the same load spread (STRATEGIES=a,b)
	$(PY) -m loadtest.compare --mode hot $(if $(STRATEGIES),--strategies $(STRATEGIES)) $(COMPARE_ARGS)

compare-opening: up  ## the herd at a sale's opening second: the crowd waits on the page, then buys (STRATEGIES=a,b)
	$(PY) -m loadtest.compare --mode opening $(if $(STRATEGIES),--strategies $(STRATEGIES)) $(COMPARE_ARGS)

compare-payment: up  ## a sale with a payment window: a share of buyers never pays, their units sell again (STRATEGIES=a,b)
	$(PY) -m loadtest.compare --mode payment --strategies $(or $(STRATEGIES),$(PAYMENT_STRATEGIES)) $(COMPARE_ARGS)

$(VENV)/.bench: requirements-bench.txt | $(VENV)/.runtime
	$(PY) -m pip install -q --disable-pip-version-check --require-hashes -r requirements-bench.txt
	touch $@

profile: up $(VENV)/.bench  ## py-spy on a live instance under purchases (STRATEGY=atomic): docs/profile/
	$(PY) -m benchmarks.profile_purchase --strategy $(or $(STRATEGY),atomic) $(PROFILE_ARGS)

bench-gate: up  ## the gate on one hot SKU against ping, AOF everysec vs always, the persisters' drain (wrk)
	scripts/install-system-packages.sh --bench
	$(PY) -m benchmarks.gate $(BENCH_ARGS)

bench-servers: up  ## the request server: gunicorn against granian on every row, alternating (wrk)
	scripts/install-system-packages.sh --bench
	$(PY) -m benchmarks.servers $(BENCH_ARGS)

bench-capacity: up  ## what bounds a sale under each design, and what adding nodes does (deploy/k8s/README.md)
	scripts/install-system-packages.sh --bench
	$(PY) -m benchmarks.capacity $(BENCH_ARGS)

bench-metrics: up  ## what counting and timing for /metrics costs: ping, the gate, atomic and setnx, on vs off (wrk)
	scripts/install-system-packages.sh --bench
	$(PY) -m benchmarks.metrics_cost $(BENCH_ARGS)

bench-buyers: up  ## what a buyer's bearer token costs a purchase: the gate and atomic, on vs off (wrk)
	scripts/install-system-packages.sh --bench
	$(PY) -m benchmarks.buyers_cost $(BENCH_ARGS)

bench-window: up  ## what a payment window costs a purchase (CPU, alternating), and one expirer's orders/s
	$(PY) -m benchmarks.window_cost $(BENCH_ARGS)

bench-room: up  ## what a waiting room costs a purchase: in-process, alternating, over the CPU an answer (wrk)
	scripts/install-system-packages.sh --bench
	$(PY) -m benchmarks.room_cost $(BENCH_ARGS)

bench-race-watch: up install-test  ## the same race with the race page closed and open (does watching change it?)
	$(PY) -m benchmarks.race_watch $(BENCH_ARGS)

bench-reads: up  ## the product page's read (nginx's cache, the apps' own) against ping, and its stock lag
	$(PY) -m benchmarks.reads $(BENCH_ARGS)

bench-checker: install  ## how long the history checker takes, with the stock's bound and without (--plain)
	$(PY) -m benchmarks.checker $(BENCH_ARGS)

bench-redis-locks: install $(VENV)/.bench  ## setnx and redisson beside redis-py's Lock and python-redis-lock
	$(PY) -m stack run -- $(PY) -m benchmarks.redis_locks $(BENCH_ARGS)

scenario: up  ## one pitfall from the seeds, broken beside fixed: make scenario S=S6
	$(PY) -m scenarios $(S)

scenarios: up  ## every scenario of the catalog (python -m scenarios --list)
	$(PY) -m scenarios all $(SCENARIO_ARGS)

chaos: up  ## sales while servers fail, every answer checked (STRATEGIES=a,b FAULTS=x,y): reports/<time>/chaos.md
	$(PY) -m chaos $(if $(STRATEGIES),--strategies $(STRATEGIES)) $(if $(FAULTS),--faults $(FAULTS)) $(CHAOS_ARGS)

verdicts: up  ## strategies x nemeses, every operation recorded and checked for linearizability: reports/<time>/verdicts/
	$(PY) -m verdicts run $(if $(STRATEGIES),--strategies $(STRATEGIES)) $(if $(NEMESES),--nemeses $(NEMESES)) $(VERDICTS_ARGS)

lint: install-test  ## ruff
	$(VENV)/bin/ruff check .

test: install-test  ## lint, build the docs (strict), then the whole suite (two workers) against a stack it starts (and stops)
	$(VENV)/bin/ruff check .
	$(PY) -m stack docs
	$(PY) -m stack run -- env PYTHON=$(PY) scripts/suite.sh $(PYTEST_ARGS)

check: install-test  ## what needs no server, in under two minutes: lint, the docs build, the tests that start nothing
	$(VENV)/bin/ruff check .
	$(PY) -m stack docs
	$(PY) -m pytest -m "not server" -q $(PYTEST_ARGS)

docs: install-test  ## build the documentation site (MkDocs, strict); nginx serves it at /docs/
	$(PY) -m stack docs

clean:  ## stop the stack, remove its runtime state (.run/) and its temp directories
	@if [ -x $(PY) ]; then $(PY) -m stack clean; else rm -rf .run; fi
