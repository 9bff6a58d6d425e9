# Fleet: build, run, test and lint. GNU make. make help prints this list.
#
#   make help                                this list
#   make build                               every function into bin/<LogicalId>/bootstrap, and bin/fleetctl
#   make fleetctl                            the fleetctl command line for this machine, into bin/fleetctl
#   make release                             fleetctl for linux, darwin and windows on amd64 and arm64, into bin/release
#   make build GOTAGS=otel                   the same with OpenTelemetry tracing compiled in (docs/deploying.md, Tracing)
#   make run                                 the API and the console on http://127.0.0.1:3000 over local DynamoDB and S3, held in memory
#   make seed-logs                           sample task logs into the local log bucket (make run first)
#   make reconcile-logs                      make the index equal to the local log buckets: ReconcileStateMachine, resuming an interrupted run (make run first)
#   make events [JSON=1]                     the Slave Changed events of make run's changes as they arrive, a line each (JSON=1: their details as JSON lines)
#   make seed-fleet [N=20000]                N slaves into the local slaves table, then the list and a state query timed (make run first)
#   make invoke FN=<LogicalId> EVENT=<file>  one event through one function, built for this machine, as sam local invoke
#        [ENV_VARS=<file>] [PARAMETER_OVERRIDES="Name=Value ..."]   its --env-vars and --parameter-overrides
#   make report FILE=<report.json[.gz]>      a large machine report through the local reports bucket (docs/reports.md)
#   make drain SLAVE=<id> [FROM=5] [EVERY=2s]  reports of the machine's running tasks down to 0, so its decommission ends (make run first; docs/fleetctl.md)
#   make check                               gofmt, go vet and the unit tests (no emulator, no browser): about a minute
#   make test                                every package compiled, then unit and integration tests (they start moto, MinIO, Chromium)
#   make test-compile                        compiles what make test runs and builds, without running it
#   make test-resilience                     concurrency, backend faults, hostile input, access control, fuzzing
#   make bench                               the performance figures, with their targets, and last the monthly AWS cost (BENCHMARKS.md)
#   make soak [MINUTES=10]                   the change feed followed by streams and by the long poll for that long: the same changes, and the stream's latency
#   make gofmt                               the Go files gofmt would change, if any (make check and make lint run it)
#   make lint                                gofmt, go vet, staticcheck, go mod tidy, cfn-lint
#   make tools                               staticcheck (make lint's) and MinIO (make test's), built into bin/tools once
#   make deploy-local                        the stack on moto's CloudFormation, then the handlers on its tables
#   make deploy                              sam build and sam deploy (samconfig.toml), to an AWS account
#   make deps                                moto for python3 (pip), the version dev/moto-requirements.txt pins; make run and the tests do this first
#   make deps-deploy                         the SAM translator for python3 (pip), for make deploy-local
#   make deps-browser                        Chromium (apt), for the console's tests and figures
#   make clean                               removes bin, .aws-sam and coverage files
#
# sam build calls build-<LogicalId> (BuildMethod: makefile) with ARTIFACTS_DIR.
#
# make run, make invoke, make seed-logs and make seed-fleet print their progress on stderr and
# keep stdout for what they answer (make invoke ... | jq works), so their
# recipes are silent (@) and say what they do themselves.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

FUNCTIONS := SlavesFunction LogsFunction InventoryFunction ExpiryFunction ConsoleFunction IndexerFunction PublisherFunction

# Lambda runs the functions on Linux, arm64 (template.yaml, Architectures);
# make invoke builds them for this machine instead.
LAMBDA_GOOS ?= linux
LAMBDA_GOARCH ?= arm64

STATICCHECK_VERSION := v0.8.2
TOOLS := $(CURDIR)/bin/tools
STATICCHECK := $(TOOLS)/staticcheck-$(STATICCHECK_VERSION)

# MinIO verifies SigV4 signatures (moto does not): the presigned-URL
# integration tests run against it. Its release tags are not Go module
# versions, so this pins a commit (the last of github.com/minio/minio); keep
# it equal to stack.MinIOVersion in dev/stack/minio.go.
MINIO_VERSION := v0.0.0-20260212201848-7aac2a2c5b7c
MINIO := $(TOOLS)/minio-$(MINIO_VERSION)

# Extra build tags, comma separated: GOTAGS=otel compiles tracing in
# (shared/tracing); the default build leaves it out.
GOTAGS ?=
comma := ,

# lambda_build,<dir>: the one build line of every function.
define lambda_build
GOOS=$(LAMBDA_GOOS) GOARCH=$(LAMBDA_GOARCH) CGO_ENABLED=0 go build -tags lambda.norpc$(if $(GOTAGS),$(comma)$(GOTAGS)) -trimpath -ldflags='-s -w' -o $(ARTIFACTS_DIR)/bootstrap ./functions/$(1)
endef

.PHONY: help build $(addprefix build-,$(FUNCTIONS)) fleetctl release run seed-logs reconcile-logs seed-fleet events invoke report drain check gofmt test test-compile test-resilience bench soak lint tools deps deps-deploy deps-browser deploy-local deploy clean

# The header of this file is the list: one place to keep it.
help:
	@awk 'NR > 2 && /^#$$/ { exit } NR > 2 { sub(/^# /, ""); print }' $(firstword $(MAKEFILE_LIST))

build: $(addprefix build-,$(FUNCTIONS)) fleetctl

# Outside sam build, binaries go to bin/<LogicalId>, never into the sources.
$(foreach fn,$(FUNCTIONS),$(eval build-$(fn): ARTIFACTS_DIR ?= $(CURDIR)/bin/$(fn)))

build-SlavesFunction:
	$(call lambda_build,slaves)

build-LogsFunction:
	$(call lambda_build,logs)

build-InventoryFunction:
	$(call lambda_build,inventory)

build-ExpiryFunction:
	$(call lambda_build,expiry)

build-IndexerFunction:
	$(call lambda_build,indexer)

build-ConsoleFunction:
	$(call lambda_build,console)

build-PublisherFunction:
	$(call lambda_build,publisher)

# fleetctl is one static binary (cmd/fleetctl, docs/fleetctl.md); its
# version is the repository's git description.
FLEETCTL_VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
FLEETCTL_LDFLAGS := -s -w -X main.version=$(FLEETCTL_VERSION)
RELEASE_PLATFORMS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64

fleetctl:
	CGO_ENABLED=0 go build -trimpath -ldflags='$(FLEETCTL_LDFLAGS)' -o bin/fleetctl ./cmd/fleetctl

release:
	@for p in $(RELEASE_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; ext=; [ "$$os" = windows ] && ext=.exe; \
		echo "make release: bin/release/fleetctl-$$os-$$arch$$ext"; \
		GOOS=$$os GOARCH=$$arch CGO_ENABLED=0 go build -trimpath -ldflags='$(FLEETCTL_LDFLAGS)' \
			-o bin/release/fleetctl-$$os-$$arch$$ext ./cmd/fleetctl; \
	done

# Built (go build skips what is up to date), then run in place of the shell,
# so Ctrl-C and kill reach it directly and it stops the emulator it started.
run: deps
	@echo 'make run: building the local server (bin/dev/run)' >&2
	@go build -o bin/dev/run ./dev/run
	@exec bin/dev/run

seed-logs:
	@go run ./dev/seedlogs

reconcile-logs:
	@go run ./dev/logreconcile

N ?= 20000

seed-fleet:
	@go run ./dev/seedfleet -n $(N)

events:
	@go run ./dev/events $(if $(JSON),-json)

# The function is built for this machine (GOOS and GOARCH of go env: Linux,
# macOS, ...), so it runs here as a plain process, without a container: the
# Lambda Runtime API it talks to is plain HTTP (dev/lambdarun). ENV_VARS and
# PARAMETER_OVERRIDES are sam local invoke's --env-vars and
# --parameter-overrides; a variable the function declares also takes its
# value from the caller's environment (LOG_URL_TTL=2h make invoke ...).
ENV_VARS ?= dev/env.local.json
PARAMETER_OVERRIDES ?=
HOST_GOOS = $(shell go env GOOS)
HOST_GOARCH = $(shell go env GOARCH)

invoke: deps
	@if [ -z "$(FN)" ] || [ -z "$(EVENT)" ]; then \
		echo 'usage: make invoke FN=<LogicalId> EVENT=<file> [ENV_VARS=<file>] [PARAMETER_OVERRIDES="Name=Value ..."]   (FN one of: $(FUNCTIONS))' >&2; exit 2; fi
	@case ' $(FUNCTIONS) ' in *' $(FN) '*) ;; *) \
		echo 'make invoke: FN=$(FN) is not a function of template.yaml; FN is one of: $(FUNCTIONS)' >&2; exit 2;; esac
	@echo 'make invoke: building $(FN) for this machine (bin/local/$(FN)) and the runner (bin/dev/invoke)' >&2
	@$(MAKE) --no-print-directory -s build-$(FN) ARTIFACTS_DIR=$(CURDIR)/bin/local/$(FN) LAMBDA_GOOS=$(HOST_GOOS) LAMBDA_GOARCH=$(HOST_GOARCH) >&2
	@go build -o bin/dev/invoke ./dev/invoke
	@bin/dev/invoke -function '$(FN)' -event '$(EVENT)' -binary bin/local/$(FN)/bootstrap \
		-env-vars '$(ENV_VARS)' -parameter-overrides '$(PARAMETER_OVERRIDES)'

# The large form of a machine report, as a scheduler sends it: FILE is
# uploaded under reports/ of the local ReportsBucket and InventoryFunction,
# built for this machine, gets S3's "Object Created" event for it.
report: deps
	@if [ -z "$(FILE)" ]; then \
		echo 'usage: make report FILE=<report.json|.json.gz|.jsonl|.jsonl.gz> [ENV_VARS=<file>]' >&2; exit 2; fi
	@echo 'make report: building InventoryFunction for this machine (bin/local/InventoryFunction) and the sender (bin/dev/report)' >&2
	@$(MAKE) --no-print-directory -s build-InventoryFunction ARTIFACTS_DIR=$(CURDIR)/bin/local/InventoryFunction LAMBDA_GOOS=$(HOST_GOOS) LAMBDA_GOARCH=$(HOST_GOARCH) >&2
	@go build -o bin/dev/report ./dev/report
	@bin/dev/report -file '$(FILE)' -binary bin/local/InventoryFunction/bootstrap -env-vars '$(ENV_VARS)'

# The scheduler's reports of one decommissioned machine whose tasks end:
# FROM running tasks, one fewer every EVERY, down to 0, each a Machine
# Report event through InventoryFunction built for this machine, so that
# fleetctl decommission --wait can be followed to its end against make run.
FROM ?= 5
EVERY ?= 2s

drain: deps
	@if [ -z "$(SLAVE)" ]; then \
		echo 'usage: make drain SLAVE=<id> [FROM=5] [EVERY=2s] [ENV_VARS=<file>]' >&2; exit 2; fi
	@echo 'make drain: building InventoryFunction for this machine (bin/local/InventoryFunction) and the reporter (bin/dev/drain)' >&2
	@$(MAKE) --no-print-directory -s build-InventoryFunction ARTIFACTS_DIR=$(CURDIR)/bin/local/InventoryFunction LAMBDA_GOOS=$(HOST_GOOS) LAMBDA_GOARCH=$(HOST_GOARCH) >&2
	@go build -o bin/dev/drain ./dev/drain
	@bin/dev/drain -slave '$(SLAVE)' -from '$(FROM)' -every '$(EVERY)' -binary bin/local/InventoryFunction/bootstrap -env-vars '$(ENV_VARS)'

# The integration tag adds files and removes none, so one run builds and
# runs the unit tests with the integration tests; otel changes only
# shared/tracing. lint checks the same two builds.
#
# The integration packages wait on the emulators (moto serves one request
# at a time) and on timers as much as they compute, so one package more
# than there are CPUs runs at once: on 2 CPUs that leaves 5% of them idle
# instead of 19%. SLOW_TESTS, the packages that run longest, are named
# first: go test starts packages in the order given, and a run that ends on
# one long package alone wastes the other CPUs. Naming one does not run it
# twice; a package missing from the list only starts later. dev/bench (every
# section of make bench at its smallest) runs alone, after the others: its
# console sections drive Chromium as shared/console's tests do, and started
# beside them, shared/console failed.
#
# make lint runs all of go vet over the same builds, so the test run does
# not repeat the part of it go test would (-vet=off). The test binaries are
# linked without their symbol table and DWARF (-s -w), which no test reads
# and which cost about a fifth of a link's CPU; a panic's trace still names
# every function and line.
TEST_PARALLEL ?= $(shell echo $$(( $$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1) + 1 )))
SLOW_TESTS := ./dev/run ./shared/console ./cmd/fleetctl ./functions ./shared/logindex ./shared/slaves ./dev/stack ./shared/jobs ./shared/dynamo ./dev/deploylocal ./dev/reconcile

test: deps deps-deploy deps-browser $(MINIO) test-compile
	go test -tags otel ./shared/tracing/...
	go test -tags integration -count=1 -vet=off -ldflags='-s -w' -p $(TEST_PARALLEL) -timeout 20m $(SLOW_TESTS) $$(go list ./... | grep -v '/dev/bench$$')
	go test -tags integration -count=1 -vet=off -ldflags='-s -w' -timeout 20m ./dev/bench

# Compile, then test: go list -export compiles every package the run needs,
# test packages included, without linking or running anything, so that no
# compile overlaps a test that keeps a deadline (go test then only links).
# The same for the binaries the tests build: the functions (lambdarun.Build
# and make invoke: Linux, no cgo, -trimpath) and fleetctl (make fleetctl).
test-compile:
	go list -tags integration -test -export -deps ./... >/dev/null
	GOOS=linux CGO_ENABLED=0 go list -tags lambda.norpc -trimpath -export -deps ./functions/... >/dev/null
	CGO_ENABLED=0 go list -trimpath -export -deps ./cmd/fleetctl >/dev/null

# The inner loop: what needs no emulator and no browser (the unit tests:
# no build tag), with gofmt and vet, in about a minute on a warm machine.
check: gofmt
	go vet -tags integration,resilience ./...
	go test -count=1 ./...

# gofmt -l over every Go file of the tree, for make check and make lint.
gofmt:
	@unformatted=$$(gofmt -l $$(find . -name '*.go' -not -path './bin/*' -not -path './.aws-sam/*')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:" >&2; echo "$$unformatted" >&2; exit 1; fi

# How long each fuzz target runs; its corpus lives in <package>/testdata/fuzz.
# Each worker minimizes a new input for a second at most (go test's default
# is a minute, which took most of a short run: docs/decisions.md).
FUZZTIME ?= 10s

# The resilience suite prints one summary line: requests driven, faults
# injected, fuzz executions and new inputs, invariant violations.
test-resilience: deps $(MINIO)
	go run ./dev/resilience -fuzztime $(FUZZTIME) $(RESILIENCE_FLAGS)

# Builds the real function binaries itself and prints one Markdown table;
# BENCHMARKS.md holds the latest run. BENCH_FLAGS=-quick for a short try.
bench: deps deps-browser $(MINIO)
	go run ./dev/bench $(BENCH_FLAGS)

# Each stream is held as deployed (slaves.StreamHold, 5 minutes), so ten
# minutes resume at least one from its last cursor; make test runs the same
# for 8 seconds, with streams of 2.
MINUTES ?= 10
soak: deps $(MINIO)
	go run ./dev/bench -only "stream soak" -soak $(MINUTES)m

lint: gofmt $(STATICCHECK)
	go vet -tags integration,resilience ./...
	go vet -tags otel ./shared/tracing/...
	$(STATICCHECK) -tags integration,resilience ./...
	$(STATICCHECK) -tags otel ./shared/tracing/...
	@go mod tidy -diff || { echo 'go.mod/go.sum are not tidy: run go mod tidy' >&2; exit 1; }
	cfn-lint template.yaml

tools: $(STATICCHECK) $(MINIO)

$(STATICCHECK):
	mkdir -p $(TOOLS)
	GOBIN=$(TOOLS) go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv $(TOOLS)/staticcheck $@

$(MINIO):
	mkdir -p $(TOOLS)
	GOBIN=$(TOOLS) go install github.com/minio/minio@$(MINIO_VERSION)
	mv $(TOOLS)/minio $@

# The local emulator: dev/motoserver.py patches moto's internals, so it runs
# only the moto dev/moto-requirements.txt pins; --installed tells whether
# python3 has that version (without importing moto, which takes seconds).
# pip's output goes to stderr, as make invoke's stdout is the function's response.
deps:
	@python3 dev/motoserver.py --installed 2>/dev/null \
		|| python3 -m pip install -r dev/moto-requirements.txt >&2

# The console's browser tests (make test) and figures (make bench) drive
# Chromium: Debian's chromium package, installed when missing (as root, or
# with sudo), with the fonts its pages are drawn in: DejaVu (what system-ui
# and sans-serif resolve to on Debian) and Liberation, named here so that a
# machine with only what chromium pulls in draws the same screenshots. The
# layout holds with any font (the console's tests check it); the fonts make
# the screenshots comparable. Without recommends: chromium's pull in
# systemd, udev and avahi (136 packages instead of 32), which headless
# Chromium does not use.
BROWSER_PACKAGES := chromium fonts-dejavu-core fonts-liberation
deps-browser:
	@if command -v dpkg-query >/dev/null; then \
		missing=$$(for p in $(BROWSER_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
		[ -z "$$missing" ] || { sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; $$sudo apt-get update -qq && \
			$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; } >&2; \
	else command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
		{ echo 'make deps-browser: install Chromium (Debian: apt-get install $(BROWSER_PACKAGES))' >&2; exit 1; }; fi

# The local deploy also translates the template with AWS's SAM translator.
deps-deploy: deps
	@python3 -c 'import importlib.util as u, sys; sys.exit(not all(u.find_spec(m) for m in ("samtranslator", "boto3")))' \
		|| python3 -m pip install aws-sam-translator >&2

# template.yaml translated by the SAM translator, created on moto's
# CloudFormation, and the real handlers run against the tables it created
# (docs/deploying.md, "Deploy"). make test runs the same in dev/deploylocal's test.
deploy-local: deps-deploy
	@go run ./dev/deploylocal

# To an AWS account, with the SAM CLI: samconfig.toml holds the defaults
# (stack fleet, us-east-1, a change set to confirm). STACK_NAME picks another
# stack; DEPLOY_FLAGS adds sam deploy options (--guided, --parameter-overrides).
# A stack name holds at most 54 characters: the expiry schedules are named
# after it and a schedule name holds 64.
STACK_NAME ?=
DEPLOY_FLAGS ?=

deploy:
	@name='$(STACK_NAME)'; if [ $${#name} -gt 54 ]; then echo "make deploy: STACK_NAME is $${#name} characters, at most 54 fit the schedule names" >&2; exit 2; fi
	@command -v sam >/dev/null || { echo 'make deploy: the SAM CLI (sam) is not installed; see https://docs.aws.amazon.com/serverless-application-model/latest/developerguide/install-sam-cli.html' >&2; exit 1; }
	sam build
	sam deploy $(if $(STACK_NAME),--stack-name $(STACK_NAME)) $(DEPLOY_FLAGS)

clean:
	rm -rf bin .aws-sam coverage.out coverage.html
