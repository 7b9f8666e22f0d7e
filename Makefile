# flashsale — every command a user needs. `make help` lists them.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: help install install-test lock up down status docs demo test-slow fuzz race compare compare-hot compare-opening compare-payment profile scenario scenarios chaos test lint check clean bench-redis-locks bench-gate bench-metrics bench-servers bench-capacity bench-locust bench-room-million bench-reads bench-race-watch bench-checker bench-buyers bench-window bench-room bench-bots verdicts results restore-drill

#: list the targets, one line each
help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-13s %s\n", $$1, $$2}'

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

# mysqlclient builds against MariaDB's client headers: named here, not as a compiler's error.
HEADERS := pkg-config --exists libmariadb 2>/dev/null || { echo "mysqlclient builds against \
	libmariadb-dev and pkg-config: make install installs them (apt, as root)"; exit 1; }

# uv installs and compiles the requirements, itself pinned and installed by pip: it checks the
# same hashes as pip would, and fetches in parallel and keeps a cache (seconds where pip took a
# minute). It reads no pip.conf: a private index is UV_DEFAULT_INDEX, extra ones UV_INDEX.
UV_VERSION := 0.13.9
UV := $(VENV)/bin/uv
INSTALL := $(UV) pip install -q --python $(PY) --require-hashes

$(UV): | $(VENV)/bin/python
	$(PY) -m pip install -q --disable-pip-version-check uv==$(UV_VERSION)

$(VENV)/.runtime: requirements.txt | $(UV)
	@$(HEADERS)
	$(INSTALL) -r requirements.txt
	touch $@

$(VENV)/.dev: requirements.txt requirements-dev.txt | $(UV)
	@$(HEADERS)
	$(INSTALL) -r requirements-dev.txt
	touch $(VENV)/.runtime $@

#: the Debian packages the stack runs (MariaDB, Redis, ZooKeeper, nginx, Prometheus and its exporters,
#: the headers mysqlclient builds against) and the virtualenv from `requirements.txt`, each only if
#: missing; `make up`, `make demo` and `make test` run it first
install:  ## Debian packages (servers, headers) and the virtualenv, whatever is missing
	scripts/install-system-packages.sh
	$(MAKE) --no-print-directory $(VENV)/.runtime

install-test:
	scripts/install-system-packages.sh --test
	$(MAKE) --no-print-directory $(VENV)/.dev

LOCK := $(UV) pip compile -q --generate-hashes --python-version 3.11 --universal --custom-compile-command "make lock"

#: compile `requirements*.in` into the fully pinned, hashed `requirements*.txt` with uv (pinned in this
#: Makefile, as no requirements file can list the tool that installs them); every install uses `--require-hashes`
lock: | $(UV)  ## compile requirements*.in into the hashed, fully pinned requirements*.txt
	$(LOCK) requirements.in -o requirements.txt
	$(LOCK) requirements-dev.in -o requirements-dev.txt
	$(LOCK) requirements-bench.in -o requirements-bench.txt

#: start the stack, or bring a running one in line with the environment: the app instances whose
#: settings changed restart half at a time while nginx sends to the others, a new strategy behind a
#: barrier ([a switch while selling](../strategies/index.md#a-switch-while-selling))
up: install  ## start the stack: MariaDB, Redis, ZooKeeper, INSTANCES x gunicorn, nginx on :8080
	$(PY) -m stack up

#: stop exactly the processes `make up` started, by PID (supervisord's children, then supervisord)
down:  ## stop exactly the processes `up` started, by PID
	@if [ -x $(PY) ]; then $(PY) -m stack down; else echo "not running"; fi

#: state, PID, port and health of every server
status:  ## state, PID and health of each server
	$(PY) -m stack status

#: install, `make up`, then `python -m loadtest.demo` (options: `--strategies`, `--stock`,
#: `--attempts`, `--concurrency`, `--section-delay-ms`) and one round of `make compare`
demo: up  ## the burst under each strategy (the oversell table), then one round of the comparison
	$(PY) -m loadtest.demo
	$(PY) -m loadtest.compare --rounds 1 $(COMPARE_ARGS)
	@echo "The stack is still up: open http://127.0.0.1:$${NGINX_PORT:-8080}/ to buy, and"
	@echo "http://127.0.0.1:$${NGINX_PORT:-8080}/race to race the strategies live (or 'make race');"
	@echo "The sale, live: http://127.0.0.1:$${NGINX_PORT:-8080}/dashboard; Prometheus, scraping every process:"
	@echo "http://127.0.0.1:$${METRICS_PORT:-9390}/ (alerts: /alerts). 'make down' stops it all."

#: `python -m loadtest.race`: every strategy chosen
#: (`STRATEGIES=none,local,setnx,redisson,zookeeper,atomic`, the default) against the same buyers at
#: once, one product each, with a progress bar and the final table (`RACE_ARGS="--stock 100 --buyers
#: 1000 --concurrency 64"`; `--room-rate 20` puts every sale behind a waiting room); the same race the
#: page `/race` starts and shows live ([Race the strategies, live](../guides/race.md))
race: up  ## every strategy against the same buyers at once, with a progress bar and the table (STRATEGIES=a,b)
	$(PY) -m loadtest.race $(if $(STRATEGIES),--strategies $(STRATEGIES)) $(RACE_ARGS)

# Locust processes sending a comparison's load: one, or a master and this many workers.
LOCUST_WORKERS ?= 1

# The correct strategies (the payment mode's default).
PAYMENT_STRATEGIES := setnx,redisson,redisson-fair,zookeeper,mysql,mysql-for-update,optimistic,atomic,gate

#: `python -m loadtest.compare`: Locust against every strategy (`STRATEGIES=a,b` to choose,
#: `COMPARE_ARGS="--rounds 5 --fast-path both"` for more, `LOCUST_WORKERS=N` for N Locust processes);
#: see [Results](../results/index.md)
compare: up  ## Locust against every strategy (STRATEGIES=a,b to choose): report in reports/<time>/
	$(PY) -m loadtest.compare --workers $(LOCUST_WORKERS) $(if $(STRATEGIES),--strategies $(STRATEGIES)) $(COMPARE_ARGS)

#: the same runner in hot mode (`--mode hot`): every request buys one hot product for 10 s, beside the
#: same load spread one product per buyer; `COMPARE_ARGS="--segments 1,2,4,8"` sweeps the hot product's
#: stock segments; see [Results: one hot product](../results/hot.md)
compare-hot: up  ## every request buys one hot product, beside the same load spread (STRATEGIES=a,b)
	$(PY) -m loadtest.compare --workers $(LOCUST_WORKERS) --mode hot $(if $(STRATEGIES),--strategies $(STRATEGIES)) $(COMPARE_ARGS)

#: the same runner at a sale's opening second (`--mode opening`): the crowd waits on the product page,
#: then buys at the opening; see [Results: the opening second](../results/opening.md)
compare-opening: up  ## the herd at a sale's opening second: the crowd waits on the page, then buys (STRATEGIES=a,b)
	$(PY) -m loadtest.compare --workers $(LOCUST_WORKERS) --mode opening $(if $(STRATEGIES),--strategies $(STRATEGIES)) $(COMPARE_ARGS)

#: the same runner on a sale with a payment window (`--mode payment`, `COMPARE_ARGS="--pay-ratio 0.7
#: --window 5 --grace 2"`): each buyer buys until it has an order, then pays and follows it until paid
#: (a payment too late is refunded: it buys again), or (a share) never pays; the unpaid units sell
#: again until every unit is paid; see [Results: pay or release](../results/payment.md)
compare-payment: up  ## a sale with a payment window: a share of buyers never pays, their units sell again (STRATEGIES=a,b)
	$(PY) -m loadtest.compare --workers $(LOCUST_WORKERS) --mode payment --strategies $(or $(STRATEGIES),$(PAYMENT_STRATEGIES)) $(COMPARE_ARGS)

$(VENV)/.bench: requirements-bench.txt | $(VENV)/.runtime
	$(INSTALL) -r requirements-bench.txt
	touch $@

#: `python -m benchmarks.profile_purchase`: py-spy on a live instance under purchases
#: (`STRATEGY=atomic`, `PROFILE_ARGS="--sku-spread 1"` for one hot product): a flame graph and the top
#: entries in `docs/profile/`
profile: up $(VENV)/.bench  ## py-spy on a live instance under purchases (STRATEGY=atomic): docs/profile/
	$(PY) -m benchmarks.profile_purchase --strategy $(or $(STRATEGY),atomic) $(PROFILE_ARGS)

#: `python -m benchmarks.gate` with wrk: the gate on one hot product against ping, Redis's AOF
#: `everysec` against `always`, sold-out answers, the persisters' drain rate, and where each row's CPU
#: goes, by process (see [The gate](../strategies/gate.md))
bench-gate: up  ## the gate on one hot SKU against ping, AOF everysec vs always, the persisters' drain (wrk)
	scripts/install-system-packages.sh --bench
	$(PY) -m benchmarks.gate $(BENCH_ARGS)

#: `python -m benchmarks.servers` with wrk: ping, the apps' product read, the gate on one hot product
#: (its scripts sent together, and alone), `atomic` spread and `redisson` hot in 8 segments under
#: gunicorn and under granian (`FLASHSALE_SERVER`), alternating, with each row's CPU an answer by role
#: (see [the request server](../results/servers.md))
bench-servers: up  ## the request server: gunicorn against granian on every row, alternating (wrk)
	scripts/install-system-packages.sh --bench
	$(PY) -m benchmarks.servers $(BENCH_ARGS)

#: `python -m benchmarks.capacity` with wrk: what bounds one hot product under each design (its hold,
#: or its Redis shard's script rate), what one app core and one MariaDB core serve of a spread sale,
#: what one persister writes; what adding nodes does to each (see
#: [capacity](../guides/kubernetes.md#capacity))
bench-capacity: up  ## what bounds a sale under each design, and what adding nodes does (deploy/k8s/README.md)
	scripts/install-system-packages.sh --bench
	$(PY) -m benchmarks.capacity $(BENCH_ARGS)

#: `python -m benchmarks.room_million`: one sale's waiting room filled with a million places through
#: its store (and a share through nginx): Redis's memory and CPU a place, an ask's cost and latency
#: with a million waiting, the admissions a second against the rate (see [the waiting
#: room](../concepts/waiting-room.md#a-million-waiting))
bench-room-million: up  ## a million places in one waiting room: memory and CPU a place, asks, the admission rate
	$(PY) -m benchmarks.room_million $(BENCH_ARGS)

#: `python -m benchmarks.locust_client`: what one Locust process costs a request (its CPU, ping and
#: purchases, one process and a master with two workers), so how many workers a rate needs (see
#: [Kubernetes: load from inside the cluster](../guides/kubernetes.md#load-from-inside-the-cluster))
bench-locust: up  ## what one Locust process costs a request: how many workers a rate needs
	$(PY) -m benchmarks.locust_client $(BENCH_ARGS)

#: `python -m benchmarks.metrics_cost`: ping, the gate, `atomic` and `setnx` with the apps' metrics on
#: and off, alternately: what counting and timing cost (see [metrics](metrics.md))
bench-metrics: up  ## what counting and timing for /metrics costs: ping, the gate, atomic and setnx, on vs off (wrk)
	scripts/install-system-packages.sh --bench
	$(PY) -m benchmarks.metrics_cost $(BENCH_ARGS)

#: `python -m benchmarks.buyers_cost` with wrk: a purchase with a buyer's bearer token against one
#: naming its buyer in the body, on the gate's hot product and `atomic` spread, alternating (see
#: [buyers](http.md#buyers))
bench-buyers: up  ## what a buyer's bearer token costs a purchase: the gate and atomic, on vs off (wrk)
	scripts/install-system-packages.sh --bench
	$(PY) -m benchmarks.buyers_cost $(BENCH_ARGS)

#: `python -m benchmarks.window_cost`: a purchase's CPU with a payment window and without (the gate,
#: `atomic` and `setnx`), alternating, and one expirer's orders a second (see [Results: pay or
#: release](../results/payment.md))
bench-window: up  ## what a payment window costs a purchase (CPU, alternating), and one expirer's orders/s
	$(PY) -m benchmarks.window_cost $(BENCH_ARGS)

#: `python -m benchmarks.room_cost`: the app's CPU a purchase of the gate's hot product with a [waiting
#: room](../concepts/waiting-room.md) (the admission checked and spent) and without, in-process,
#: alternating; and what it adds over the apps' CPU an answer under wrk (installs wrk)
bench-room: up  ## what a waiting room costs a purchase: in-process, alternating, over the CPU an answer (wrk)
	scripts/install-system-packages.sh --bench
	$(PY) -m benchmarks.room_cost $(BENCH_ARGS)

#: `python -m benchmarks.bots`: people (one account, one place each) against a bot (hundreds of
#: accounts, as fast as it goes) for a waiting room's places, its [proof of
#: work](http.md#proof-of-work) off and at two difficulties, in turn: the bot's share of the stock, the
#: people's wait, and the server's CPU to check a solution (see [the waiting room](../concepts/waiting-room.md))
bench-bots: up  ## people against a bot for a waiting room's places, the proof of work off and on
	$(PY) -m benchmarks.bots $(BENCH_ARGS)

#: `python -m benchmarks.race_watch`: the same race with the race page closed and open, alternating
#: (does watching change it?)
bench-race-watch: up install-test  ## the same race with the race page closed and open (does watching change it?)
	$(PY) -m benchmarks.race_watch $(BENCH_ARGS)

#: `python -m benchmarks.reads` with wrk: the product page's read through nginx's cache and from the
#: apps' own, against ping, and how far the stock it shows lags the sale (see [the product page's
#: read](../concepts/reads.md))
bench-reads: up  ## the product page's read (nginx's cache, the apps' own) against ping, and its stock lag
	$(PY) -m benchmarks.reads $(BENCH_ARGS)

#: `python -m benchmarks.checker`: how long the history checker takes on made-up sales of 5,000 and
#: 10,000 purchases, with its bound on the stock and without (`BENCH_ARGS=--plain`) (see [the
#: checker](../guides/verdicts.md#the-checker))
bench-checker: install  ## how long the history checker takes, with the stock's bound and without (--plain)
	$(PY) -m benchmarks.checker $(BENCH_ARGS)

#: the Redis locks beside redis-py's `Lock` and python-redis-lock (see [Lock
#: benchmarks](../results/lock-benchmarks.md))
bench-redis-locks: install $(VENV)/.bench  ## setnx and redisson beside redis-py's Lock and python-redis-lock
	$(PY) -m stack run -- $(PY) -m benchmarks.redis_locks $(BENCH_ARGS)

#: a pitfall of the [source articles](sources.md), broken beside fixed: `make scenario S=S6` (see
#: [Scenarios](scenarios.md))
scenario: up  ## one pitfall from the source articles, broken beside fixed: make scenario S=S6
	$(PY) -m scenarios $(S)

#: every scenario of the catalogue, each broken beside fixed (`python -m scenarios --list` names them;
#: see [Scenarios](scenarios.md))
scenarios: up  ## every scenario of the catalog (python -m scenarios --list)
	$(PY) -m scenarios all $(SCENARIO_ARGS)

#: `python -m chaos`: sales while a server fails, every final answer checked against the database
#: (`STRATEGIES=a,b FAULTS=kill-app,pause-app`); see [Faults](../concepts/faults.md)
chaos: up  ## sales while servers fail, every answer checked (STRATEGIES=a,b FAULTS=x,y): reports/<time>/chaos.md
	$(PY) -m chaos $(if $(STRATEGIES),--strategies $(STRATEGIES)) $(if $(FAULTS),--faults $(FAULTS)) $(CHAOS_ARGS)

#: `python -m verdicts run`: strategies × nemeses, every try recorded and the history checked for
#: linearizability, with the window where no order fits drawn (`STRATEGIES=a,b NEMESES=calm,kill-app`,
#: `VERDICTS_ARGS=--small`); `python -m verdicts check FILE [--svg W]` checks a history of your own;
#: see [Verdicts](../guides/verdicts.md)
verdicts: up  ## strategies x nemeses, every operation recorded and checked for linearizability: reports/<time>/verdicts/
	$(PY) -m verdicts run $(if $(STRATEGIES),--strategies $(STRATEGIES)) $(if $(NEMESES),--nemeses $(NEMESES)) $(VERDICTS_ARGS)

#: every figure the docs include measured again: each command named on the first line of a file
#: under `docs/results/measured/` (and of the README's demo table) run once, one after another, on the
#: running stack at HEAD, so that every file names one commit (the code's: the last that changed
#: anything but the pages and the tests); refused on a tree with uncommitted changes; prints each
#: command's time and the total, and fails if a command failed or a file was not rewritten
#: (`RESULTS_ARGS=--list` numbers the commands, `--from N` continues a run at the N-th, `--only TEXT`
#: runs those containing it, `--check` says which files the code's commit did not write)
results: up install-test $(VENV)/.bench  ## every measured file's command again, at HEAD on a clean tree (hours)
	scripts/install-system-packages.sh --bench
	$(PY) -m stack results $(RESULTS_ARGS)

#: `python -m stack restore-drill`: the stack's database dumped with the nightly backup's options, restored
#: into a scratch MariaDB and compared with the source, table by table (rows, checksum), the stored
#: procedures and the units of orders, ledger, stock and payments; fails on any difference
#: (`DRILL_ARGS=--database NAME`); see [Kubernetes: backups](../guides/kubernetes.md#backups)
restore-drill: up  ## dump the database as the nightly backup does, restore it into a scratch server, compare
	$(PY) -m stack restore-drill $(DRILL_ARGS)

#: `ruff check .` with the project's rules (`pyproject.toml`)
lint: install-test  ## ruff
	$(VENV)/bin/ruff check .

# Lanes of the suite, each on a stack of its own: two halve the stack's queue (LANES=1: one stack;
# more: one more stack, for the exclusive tests).
LANES ?= 2

#: install (with test packages), lint, then the suite with `python -m stack test --checks`, the
#: type checker and the docs build (strict) beside it: in `LANES` lanes at once (2 unless set), each
#: on a stack of its own, each running a share of the tests that drive its stack and beside them a
#: part of its own, and beside the lanes, on a stack of their own, those that fault a server (with
#: one lane: after, alone on its stack); every part then draws the rest from one pool until none is
#: left, so that they end together; starts the stacks it needs and stops what it started; prints each
#: part's time and the slowest tests ([tests](../development/tests.md))
test: install-test  ## lint, then the whole suite against the stacks it starts (and stops), types and docs beside it
	$(PY) -m stack test --checks --lanes $(LANES) -- $(PYTEST_ARGS)

#: `make test` on a machine half as fast, from the lint on: the suite and every process it starts
#: under a CPU quota of half the machine's cores (a cgroup, as root: `stack.cpuquota`), where a test
#: that assumes the machine's speed fails; `python -m stack test --burn N` runs it beside N spinning
#: processes instead ([tests](../development/tests.md))
test-slow: install-test  ## make test on a machine half as fast: under a CPU quota of half the cores
	$(PY) -m stack test --checks --cpu 0.5 --lanes $(LANES) -- $(PYTEST_ARGS)

#: both schemathesis runs of the suite (`tests/test_schemathesis.py`) against the stack, with
#: `EXAMPLES` random cases an operation (the suite's runs take 50): `make fuzz EXAMPLES=5000`
fuzz: up install-test  ## schemathesis over every operation, many more cases than the suite's (EXAMPLES=1000)
	FLASHSALE_FUZZ_EXAMPLES=$(or $(EXAMPLES),1000) $(PY) -m pytest tests/test_schemathesis.py -p no:cacheprovider \
		$(PYTEST_ARGS)

#: what needs no server, no root and no Debian package beyond the headers the virtualenv builds
#: against (`python -m stack check`): lint, then at once the type checker (mypy, `pyproject.toml`)
#: and the docs build, and the tests that start nothing in two halves of equal time
#: (`pytest -m "not server and not system"`; a test is `server` when it asks for the database, the
#: stack or a lock server, or says it starts servers of its own; `system` when it runs a program
#: from a Debian package that `make test` installs); where `promtool` and `amtool` are
#: installed (`make test` installs them), the alert rules' and Alertmanager's checks too, which
#: start nothing either (`tests/test_alerts.py`'s offline ones); each part's time at the end
check: $(VENV)/.dev  ## lint, types, the docs build, the tests that start nothing: no server, no root, no apt
	$(PY) -m stack check -- $(PYTEST_ARGS)

#: write this reference from the Makefile and the management commands (`python -m stack commands`), then build this
#: documentation with MkDocs (strict) outside the checkout; the stack's nginx serves it at `/docs/`
docs: install-test  ## write the commands reference (this file, manage.py), then build the docs (MkDocs, strict)
	$(PY) -m stack commands
	$(PY) -m stack docs

#: `make down`, then delete `.run/` (databases, logs, generated configs) and the stack's temp
#: directories
clean:  ## stop the stack, remove its runtime state (.run/) and its temp directories
	@if [ -x $(PY) ]; then $(PY) -m stack clean; else rm -rf .run; fi
