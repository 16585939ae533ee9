# Every target installs what it needs into project-local, git-ignored places:
# Python tools (moto, cfn-lint, cargo-lambda) into .venv, state into .local.

# The pinned toolchain (rust-toolchain.toml), named where rustup has it only as stable.
_ := $(shell tools/toolchain.sh)
VENV     := .venv
TOOLS    := $(VENV)/.installed
# cargo-deny, built from crates.io once per machine, outside the clone (a
# fresh clone on the same machine, as CI's, finds it), by version.
DENY_VERSION := 0.20.2
DENY     := $(HOME)/.cache/refund-chat/cargo-deny-$(DENY_VERSION)/bin/cargo-deny
# When make began: each long step of make test says how long it has been.
START    := $(shell date +%s)
banner    = @printf '\n== %s (%ss into make)\n' '$(1)' "$$(( $$(date +%s) - $(START) ))"
# Debian's headless Chromium and its WebDriver, for the chat page's browser test.
BROWSER  := /usr/bin/chromedriver
# axe-core from npm (pinned by tools/axe/package-lock.json), injected into
# the chat page and the desk by the browser tests (contract 36).
AXE      := tools/axe/node_modules/axe-core/axe.min.js
EVENT    ?= events/refund.json

.PHONY: run check advisories test chaos eval invoke smoke ledger admin bench bench-live instructions load build reset-payments clean-local screenshots

SEED     ?= 1
REQUESTS ?= 10000
K        ?= 4
SAFETY   := someone_elses_order,above_limit,prompt_injection,injection_across_messages,handoff,outside_window,not_delivered,pii,address_change,return,visitor

$(BROWSER):
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver

$(AXE): tools/axe/package.json tools/axe/package-lock.json
	npm ci --prefix tools/axe --no-audit --no-fund --silent
	touch $@

$(DENY):
	cargo install --locked --quiet --root $(dir $(patsubst %/,%,$(dir $(DENY)))) cargo-deny --version $(DENY_VERSION)

$(TOOLS): tools/requirements.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r tools/requirements.txt
	touch $@

## run: the function under cargo lambda watch with every dependency on 127.0.0.1
run: $(TOOLS)
	tools/run-local.sh

## check: the fast loop before make test: formatting, clippy with warnings denied, unit tests,
## the supply chain (cargo deny: bans, licences, sources; deny.toml)
check: $(DENY)
	$(call banner,formatting and clippy and the unit tests)
	cargo fmt --all --check
	cargo clippy --workspace --all-targets --locked --quiet -- -D warnings
	cargo test --workspace --lib --bins --locked --quiet
	$(DENY) --log-level error check bans licenses sources

## advisories: the RustSec advisories (fetches the database from GitHub, which CI cannot reach)
advisories: $(DENY)
	$(DENY) check advisories

## test: make check, then the whole suite (unit, property, mock-server, moto, events, template, the page in Chromium),
## a short chaos run, the evaluation with the local and the adversarial models, cfn-lint (on template.yaml and
## on the transformed template) and sam validate,
## and the deployed artifact itself: the arm64 bootstraps, built as make build does and checked
test: check $(TOOLS) $(BROWSER) $(AXE)
	# The API tests run the support team's tool, a binary of its own package.
	$(call banner,the whole suite)
	cargo build --locked --quiet -p refund-chat-admin
	MOTO_SERVER=$(abspath $(VENV))/bin/moto_server cargo test --workspace --locked --no-fail-fast
	cargo build --locked --quiet -p refund-chat --bin refund-chat
	$(call banner,the smoke test against the local stack)
	MOTO_SERVER=$(abspath $(VENV))/bin/moto_server tools/smoke-local.sh
	$(call banner,a short chaos run)
	cargo run --locked --quiet -p refund-chat-chaos -- --seed 2026 --requests 400 --time-limit 300
	$(call banner,the evaluation: the local and the adversarial models)
	cargo run --locked --quiet -p refund-chat-eval -- --model local --k 1 --check --out target/eval-ci
	cargo run --locked --quiet -p refund-chat-eval -- --model adversarial --families $(SAFETY) --k 8 --check \
	  --out target/eval-adversarial
	$(call banner,the template: cfn-lint and sam validate and the transformed template)
	$(VENV)/bin/cfn-lint template.yaml
	SAM_CLI_TELEMETRY=0 AWS_DEFAULT_REGION=us-east-1 $(VENV)/bin/sam validate --lint
	$(VENV)/bin/python tools/check-transform.py template.yaml target/transformed-template.json
	# The transformed template, with no exception: what the SAM pass's one hides.
	$(VENV)/bin/cfn-lint target/transformed-template.json
	$(call banner,the arm64 bootstraps)
	$(MAKE) build
	python3 tools/check-bootstrap.py
	$(call banner,done)

## eval: every task of eval/tasks K times (default 4) against OPENAI_BASE_URL/OPENAI_API_KEY, else the local model
eval: $(TOOLS)
	cargo run --locked --quiet -p refund-chat-eval -- --k $(K)

## chaos: the function under a misbehaving model, payments, ledger and clients; SEED=, REQUESTS=
chaos: $(TOOLS)
	cargo build --locked --quiet -p refund-chat --bin refund-chat
	cargo run --locked --quiet -p refund-chat-chaos -- --seed $(SEED) --requests $(REQUESTS)

## invoke: send EVENT (default events/refund.json) to the function started by make run
invoke: $(TOOLS)
	$(VENV)/bin/cargo-lambda lambda invoke refund-chat --data-file $(EVENT) \
	  --invoke-address 127.0.0.1 --invoke-port 9000

## smoke: the first hour's checks of docs/deploy.md against a deployed API: make smoke URL=https://.../Prod/support/refund-chat TOKEN=...
## (ORDER=, AMOUNT= for the test order's refund; STAFF_TOKEN= a staff member's ID token for the desk's queue, and with
## LIVE_URL= the stack's LiveRealtimeUrl, a reply's live poke heard on the desk's channel;
## make test runs it against the local stack)
smoke: $(TOOLS)
	$(VENV)/bin/python tools/smoke.py --url "$(URL)" --token "$(TOKEN)" $(if $(CUSTOMER),--customer $(CUSTOMER)) \
	  $(if $(ORDER),--order $(ORDER)) $(if $(AMOUNT),--amount $(AMOUNT)) $(if $(STAFF_TOKEN),--staff-token "$(STAFF_TOKEN)") \
	  $(if $(LIVE_URL),--live-url "$(LIVE_URL)")

## ledger: the refund ledger (DynamoDB in moto) of the stack make run started, oldest first
ledger: $(TOOLS)
	cargo run --locked --quiet -p refund-chat-testkit --bin refund-chat-local-aws -- ledger

## screenshots: the README's tours in pictures, made again in Chromium (docs/tour-chat.png, docs/tour-desk.png)
screenshots: $(TOOLS) $(BROWSER) $(AXE)
	MOTO_SERVER=$(abspath $(VENV))/bin/moto_server cargo test --locked --test widget -- --exact \
	  the_tours_in_pictures_show_no_code_no_id_and_no_iso_time_to_the_customer
	cp target/test-artifacts/tour-chat.png target/test-artifacts/tour-desk.png docs/

## admin: refund-chat-admin against the stack make run started, e.g. make admin ARGS="pending"
admin:
	set -a && . ./local.env && set +a && cargo run --quiet -p refund-chat-admin -- $(ARGS)

## bench: the release bootstrap through a Runtime API emulator (one table), what one DynamoDB operation costs by client, then the in-process turn loop
# Built one package at a time, so the bench's features never leak into the measured bootstrap.
bench:
	cargo build --release --locked -p refund-chat
	cargo build --release --locked -p refund-chat-bench
	target/release/refund-chat-bench target/release/refund-chat
	target/release/sdk-op-cost
	cargo bench --locked -p refund-chat --features test-support --bench turn_loop -- --noplot

## bench-live: click to screen of live pokes (contract 31) under the local stack, the fallback poll off:
## p50, p95 and the maximum over 50 tries each way (a person's reply to the page, a customer's message to the desk)
bench-live: $(TOOLS)
	cargo build --release --locked -p refund-chat-bench --bin refund-chat-bench-live
	MOTO_SERVER=$(abspath $(VENV))/bin/moto_server target/release/refund-chat-bench-live

## instructions: instructions per cold start and per warm turn under callgrind, steady where make bench's CPU times are not
instructions:
	tools/instructions-per-turn.sh

## load: a peak on the local stack, the model at a real latency (LATENCY_MS=, JITTER_MS=, CLIENTS=, MODEL_RPM=);
## a table, target/load/load.json, and the plot docs/capacity-load.png
LATENCY_MS ?= 800
JITTER_MS  ?= 300
CLIENTS    ?= 1,2,4,8,16
MODEL_RPM  ?=
load: $(TOOLS)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r tools/requirements-load.txt
	cargo build --release --locked -p refund-chat -p refund-chat-bench
	MOTO_SERVER=$(abspath $(VENV))/bin/moto_server target/release/refund-chat-load target/release/refund-chat \
	  --clients $(CLIENTS) --latency-ms $(LATENCY_MS) --jitter-ms $(JITTER_MS) $(if $(MODEL_RPM),--model-rpm $(MODEL_RPM)) \
	  --out target/load
	$(VENV)/bin/python3 tools/plot_load.py target/load/load.json docs/capacity-load.png

## build: the release bootstrap for Lambda (arm64, Amazon Linux 2023)
build: $(TOOLS)
	PATH=$(abspath $(VENV))/bin:$$PATH cargo lambda build --release --arm64 --package refund-chat

## reset-payments: forget the payments sandbox's refunds (make run starts from the seeded orders;
## the refund ledger lives in moto's memory and starts empty on every make run)
reset-payments:
	rm -f .local/payments-refunds.jsonl

clean-local:
	rm -rf .local $(VENV)
