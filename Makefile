# hookledger: the two README commands are `make demo` and `make test`; `make docs` builds the
# book in docs/ (target/book).
SHELL := /bin/bash
VENV := .venv-tools
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export SAM_CLI_TELEMETRY := 0

.PHONY: demo run test docs chaos fuzz package migrate replay redrive inspect stuck rejected sweep audit bench bench-sweep bench-load tools postgres openssl chromium build clean

## demo: set up, run the receiver under cargo-lambda on a throwaway PostgreSQL, deliver events/, print;
## CONSOLE=1 then serves the ledger console on the demo's ledger until interrupted
demo: tools postgres openssl
	scripts/demo.sh demo

## run: the same set-up; keep the receiver serving on 127.0.0.1:9000 and the ledger console on
## 127.0.0.1:8470 (its URL with the access token printed) until interrupted
run: tools postgres openssl
	scripts/demo.sh run

## test: fmt, clippy, every test on a throwaway PostgreSQL, the console's in headless Chromium too
## (fails on any failed or ignored test, and when the end-to-end tests number fewer than
## tests/minimum-e2e-tests)
test: tools postgres chromium openssl
	HOOKLEDGER_TOOLS_PYTHON=$(CURDIR)/$(VENV)/bin/python scripts/test.sh

## docs: the book in docs/ built with mdBook into target/book/ (open target/book/index.html);
## mdBook (pinned) is installed from crates.io into .tools/ when missing. Not part of make test,
## which checks the book's links, its summary and the configuration reference without mdBook
docs:
	scripts/docs.sh

## chaos: the receiver and the worker as real processes under faults (retry storm, receivers
## killed, ...), driven by a provider simulator on a throwaway durable PostgreSQL; writes
## RELIABILITY.md (about 10 minutes after the build). CHAOS_ARGS passes options (chaos --help),
## e.g. CHAOS_ARGS="--scenario retry_storm --seed 42"; CHAOS_PROFILE=release builds optimised
chaos: postgres
	scripts/chaos.sh

## package: every function crate built for Lambda (provided.al2023, glibc 2.34) with cargo-lambda
## in one release build, zipped (<target dir>/lambda/<function>/bootstrap.zip), each bootstrap
## checked to run there; prints the sizes. ARCH=arm64 (default) or ARCH=x86_64
ARCH ?= arm64
package: $(VENV)/.installed
	ARCH=$(ARCH) scripts/package.sh

# The operator CLI's wrappers need the database (and, except migrate, the sources) in the
# environment, as the functions do.
define need_database
	@if [ -z "$${DATABASE_URL:-}$${HOOKLEDGER_DB_SECRET_ARN:-}" ]; then \
	  echo "make $@: set DATABASE_URL to the database (postgres://user:pass@host:port/db)" >&2; \
	  exit 2; \
	fi
endef
define need_sources
	@if [ -z "$${HOOKLEDGER_SOURCES:-}$${HOOKLEDGER_SOURCES_FILE:-}$${HOOKLEDGER_SOURCES_SECRET_ARN:-}" ]; then \
	  echo "make $@: set HOOKLEDGER_SOURCES_FILE (or HOOKLEDGER_SOURCES, HOOKLEDGER_SOURCES_SECRET_ARN) to the sources the functions use (events/sources.local.json for the local demo)" >&2; \
	  exit 2; \
	fi
endef
HOOKLEDGER := cargo run --quiet -p hookledger-handlers --bin hookledger --

## migrate: apply the pending migrations to DATABASE_URL (hookledger migrate)
migrate:
	$(need_database)
	$(HOOKLEDGER) migrate $(ARGS)

## replay: pull SOURCE's events of a window back from its provider's API (hookledger replay):
##   make replay SOURCE=stripe SINCE=2026-12-01T09:20:00Z [UNTIL=...] [DRY_RUN=1]
##   [CURSOR=<next_cursor> to resume] [ARGS=--json]
replay:
	$(need_database)
	$(need_sources)
	@if [ -z "$(SOURCE)" ] || [ -z "$(SINCE)" ]; then \
	  echo 'make replay: set SOURCE and SINCE=<RFC 3339> [UNTIL=...] (DRY_RUN=1 to count only, CURSOR=... to resume)' >&2; \
	  exit 2; \
	fi
	$(HOOKLEDGER) replay --source '$(SOURCE)' --since '$(SINCE)' \
	  $(if $(UNTIL),--until '$(UNTIL)') $(if $(CURSOR),--starting-after '$(CURSOR)') \
	  $(if $(DRY_RUN),--dry-run) $(ARGS)

## redrive: dead letters of SOURCE back to the worker (hookledger redrive), by id
## (EVENT_IDS="evt_1 evt_2") or by when they went dead (SINCE=2026-12-01T09:00:00Z [UNTIL=...]);
## DRY_RUN=1 only counts; ARGS="--json", or ARGS="--ignored --event-type T" with SINCE to re-run
## ignored events
redrive:
	$(need_database)
	$(need_sources)
	@if [ -z "$(SOURCE)" ] || [ -z "$(EVENT_IDS)$(SINCE)" ]; then \
	  echo 'make redrive: set SOURCE and EVENT_IDS="id ..." or SINCE=<RFC 3339> [UNTIL=...] (DRY_RUN=1 to count only)' >&2; \
	  exit 2; \
	fi
	$(HOOKLEDGER) redrive --source '$(SOURCE)' \
	  $(if $(EVENT_IDS),--event-id $(EVENT_IDS)) $(if $(SINCE),--since '$(SINCE)') \
	  $(if $(UNTIL),--until '$(UNTIL)') $(if $(DRY_RUN),--dry-run) $(ARGS)

## inspect: one ledger row (hookledger inspect): SOURCE=stripe EVENT_ID=evt_... [ARGS=--json]
inspect:
	$(need_database)
	$(need_sources)
	@if [ -z "$(SOURCE)" ] || [ -z "$(EVENT_ID)" ]; then \
	  echo "make inspect: set SOURCE and EVENT_ID" >&2; \
	  exit 2; \
	fi
	$(HOOKLEDGER) inspect --source '$(SOURCE)' '$(EVENT_ID)' $(ARGS)

## stuck: the auditor's stuck claims and expired leases now (hookledger stuck) [ARGS=--json]
stuck:
	$(need_database)
	$(need_sources)
	$(HOOKLEDGER) stuck $(ARGS)

## rejected: the deliveries the receiver refused, per source and reason (hookledger rejected):
## [SINCE=7d] (default 24h) [ARGS=--json]
rejected:
	$(need_database)
	$(need_sources)
	$(HOOKLEDGER) rejected $(if $(SINCE),--since '$(SINCE)') $(ARGS)

## sweep: delete expired ledger keys now (hookledger sweep) in the database at DATABASE_URL, with the
## same sources as the functions (HOOKLEDGER_SOURCES, _FILE or _SECRET_ARN: each source's retention;
## required, since a source it does not know is swept under the 30-day default); ARGS=--json
sweep:
	@if [ -z "$${DATABASE_URL:-}" ]; then \
	  echo "make sweep: set DATABASE_URL to the database to sweep (postgres://user:pass@host:port/db)" >&2; \
	  exit 2; \
	fi
	@if [ -z "$${HOOKLEDGER_SOURCES:-}$${HOOKLEDGER_SOURCES_FILE:-}$${HOOKLEDGER_SOURCES_SECRET_ARN:-}" ]; then \
	  echo "make sweep: set HOOKLEDGER_SOURCES_FILE (or HOOKLEDGER_SOURCES, HOOKLEDGER_SOURCES_SECRET_ARN) to the sources the functions use: their retention decides what is deleted (events/sources.local.json for the local demo)" >&2; \
	  exit 2; \
	fi
	cargo run --quiet -p hookledger-handlers --bin hookledger -- sweep $(ARGS)

## audit: the auditor's report now against DATABASE_URL (read-only: ARGS="--record" records the
## run, ARGS="--json" prints JSON); the sources default to events/sources.local.json
audit:
	$(need_database)
	$(need_sources)
	$(HOOKLEDGER) audit $(ARGS)

## bench: the performance figures side by side, all from one run (issue 12): the receiver over
## HTTP and a FastAPI + asyncpg peer under the same load (bench-http), pgbench's limit and the
## per-event database work (bench-limit), the ledger at 10k/1M/10M rows, cold start and footprint
## (bench-cold), the Lambda cost model; each part on its own throwaway PostgreSQL with fsync on;
## signature verification per algorithm of the scheme model (bench-verify, no database); receiver
## CPU, p50/p99 and stored bytes with payload encryption off and on (bench-privacy, issue 28).
## Writes dev/bench/RESULTS.md and dev/bench/throughput.png. PARTS="http limit scale cold verify
## privacy" selects parts; BENCH_HTTP_ARGS passes options to bench-http (bench-http --help),
## BENCH_VERIFY_ARGS to bench-verify, BENCH_PRIVACY_ARGS to bench-privacy (--help of each)
PARTS ?= http limit scale cold verify privacy
bench: postgres .venv-bench/.installed
ifneq ($(filter privacy,$(PARTS)),)
	@echo "make bench: part privacy (bench-privacy: encryption off/on per delivery)" >&2
	nice -n 5 cargo build --release -p bench --bin bench-privacy
	HOOKLEDGER_PG_DURABLE=1 scripts/with-postgres.sh \
	  $${CARGO_TARGET_DIR:-target}/release/bench-privacy $(BENCH_PRIVACY_ARGS) >/dev/null
endif
	PARTS="$(PARTS)" BENCH_VENV=.venv-bench scripts/bench.sh

.venv-bench/.installed: dev/bench/requirements.txt dev/bench/peers/fastapi/requirements.txt
	python3 -m venv .venv-bench
	.venv-bench/bin/pip install --quiet --disable-pip-version-check -r dev/bench/requirements.txt
	touch $@

## bench-sweep: claim latency while the retention sweep deletes a 1M-row ledger (no sweep, the
## default sweep, the variants 5000:25, 500:25, 1000:25:lz4 as batch_size:duty_percent, one
## unbatched DELETE, a control), then the auditor's query times on 1M and 10M rows (release build,
## own throwaway PostgreSQL with fsync on, about 17 GB of disk; about 14 minutes); writes
## dev/bench/SWEEP.md, prints a summary. BENCH_ARGS passes options (bench-sweep --help), e.g.
## BENCH_ARGS="--ten-million false" (no 10M ledger: 6 minutes less) or "--sweep-variants 1000:10"
bench-sweep: postgres
	cargo build --release -p bench
	HOOKLEDGER_PG_DURABLE=1 scripts/with-postgres.sh \
	  cargo run --release --quiet -p bench --bin bench-sweep -- $(BENCH_ARGS)

## bench-load: a rough throughput check of the inline receive path (bench-load: in-process
## deliveries/s and CPU per delivery) on its own throwaway PostgreSQL; BENCH_ARGS="--n 20000
## --concurrency 64" (bench-load --help)
bench-load: postgres
	cargo build --release -p bench --bin bench-load
	scripts/with-postgres.sh cargo run --release --quiet -p bench --bin bench-load -- $(BENCH_ARGS) >/dev/null

## fuzz: every cargo-fuzz target of dev/fuzz/ (nightly; cargo-fuzz installed into .tools/ when
## missing) for FUZZ_SECS seconds each (default 60; 11 targets), one libFuzzer process at a time;
## prints executions, exec/s, corpus and crashes per target and writes dev/fuzz/RESULTS.md; fails
## when a target crashed. FUZZ_TARGETS="verify_stripe extract" selects targets
FUZZ_SECS ?= 60
fuzz:
	FUZZ_SECS=$(FUZZ_SECS) FUZZ_TARGETS="$(FUZZ_TARGETS)" scripts/fuzz.sh

## tools: a venv with cargo-lambda and zig, aws-sam-cli, moto, and the providers' libraries (PyPI,
## and npm for GitHub's and Shopify's, pinned by tests/interop/node/package-lock.json)
NODE_INTEROP := tests/interop/node
tools: $(VENV)/.installed $(NODE_INTEROP)/node_modules/.installed

$(VENV)/.installed: scripts/requirements-tools.txt tests/interop/requirements.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check \
	  -r scripts/requirements-tools.txt -r tests/interop/requirements.txt
	touch $@

$(NODE_INTEROP)/node_modules/.installed: $(NODE_INTEROP)/package.json $(NODE_INTEROP)/package-lock.json
	@scripts/nodejs.sh install
	cd $(NODE_INTEROP) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

## postgres: PostgreSQL server binaries and pgbouncer (apt-get when missing)
postgres:
	@scripts/postgres.sh install

## openssl: the distribution's OpenSSL headers (libssl-dev, pkg-config; apt-get when missing, best
## effort), which demo, run and test link instead of compiling the vendored OpenSSL
openssl:
	@scripts/openssl.sh install

## chromium: headless Chromium and chromedriver for the console's browser test (apt-get when
## missing)
chromium:
	@scripts/chromium.sh install

build:
	cargo build --workspace

clean:
	cargo clean
	rm -rf $(VENV) .venv-bench $(NODE_INTEROP)/node_modules
