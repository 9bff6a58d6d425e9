# Fleet: build, run, test and lint. GNU make.
#
#   make build                               every function into bin/<LogicalId>/bootstrap
#   make build GOTAGS=otel                   the same with OpenTelemetry tracing compiled in (README, Tracing)
#   make run                                 the API on http://127.0.0.1:3000 over local DynamoDB and S3
#   make seed-logs                           sample task logs into the local log bucket (make run first)
#   make invoke FN=<LogicalId> EVENT=<file>  one event through one function, locally
#   make test                                unit tests, then integration tests (they start moto and MinIO)
#   make test-resilience                     concurrency, backend faults, hostile input, access control, fuzzing
#   make bench                               the performance figures, with their targets (BENCHMARKS.md)
#   make lint                                gofmt, go vet, staticcheck, go mod tidy, cfn-lint
#
# sam build calls build-<LogicalId> (BuildMethod: makefile) with ARTIFACTS_DIR.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

FUNCTIONS := SlavesFunction LogsFunction InventoryFunction ExpiryFunction

# Lambda runs the functions on arm64 (template.yaml, Architectures).
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
GOOS=linux GOARCH=$(LAMBDA_GOARCH) CGO_ENABLED=0 go build -tags lambda.norpc$(if $(GOTAGS),$(comma)$(GOTAGS)) -trimpath -ldflags='-s -w' -o $(ARTIFACTS_DIR)/bootstrap ./functions/$(1)
endef

.PHONY: build $(addprefix build-,$(FUNCTIONS)) run seed-logs invoke test test-resilience bench lint deps clean

build: $(addprefix build-,$(FUNCTIONS))

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

# Built, then run in place of the shell, so Ctrl-C and kill reach it directly
# and it stops the emulator it started.
run: deps
	go build -o bin/dev/run ./dev/run
	exec bin/dev/run

seed-logs:
	go run ./dev/seedlogs

# Built for this machine's architecture, so it runs here; Linux only (GOOS=linux).
invoke: deps
	@if [ -z "$(FN)" ] || [ -z "$(EVENT)" ]; then \
		echo 'usage: make invoke FN=<LogicalId> EVENT=<file>   (FN one of: $(FUNCTIONS))' >&2; exit 2; fi
	$(MAKE) --no-print-directory build-$(FN) ARTIFACTS_DIR=$(CURDIR)/bin/local/$(FN) LAMBDA_GOARCH=$(shell go env GOARCH)
	go run ./dev/invoke -function $(FN) -event $(EVENT) -binary bin/local/$(FN)/bootstrap

test: deps $(MINIO)
	go test ./...
	go test -tags otel ./shared/tracing/...
	go test -tags integration -count=1 ./...

# How long each fuzz target runs; its corpus lives in <package>/testdata/fuzz.
FUZZTIME ?= 20s

# The resilience suite prints one summary line: requests driven, faults
# injected, fuzz executions, invariant violations.
test-resilience: deps $(MINIO)
	go run ./dev/resilience -fuzztime $(FUZZTIME)

# Builds the real function binaries itself and prints one Markdown table;
# BENCHMARKS.md holds the latest run. BENCH_FLAGS=-quick for a short try.
bench: deps $(MINIO)
	go run ./dev/bench $(BENCH_FLAGS)

lint: $(STATICCHECK)
	@unformatted=$$(gofmt -l $$(find . -name '*.go' -not -path './bin/*' -not -path './.aws-sam/*')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:" >&2; echo "$$unformatted" >&2; exit 1; fi
	go vet ./...
	go vet -tags integration ./...
	go vet -tags resilience ./...
	go vet -tags otel ./...
	$(STATICCHECK) ./...
	$(STATICCHECK) -tags integration ./...
	$(STATICCHECK) -tags resilience ./...
	$(STATICCHECK) -tags otel ./...
	@go mod tidy -diff || { echo 'go.mod/go.sum are not tidy: run go mod tidy' >&2; exit 1; }
	cfn-lint template.yaml

$(STATICCHECK):
	mkdir -p $(TOOLS)
	GOBIN=$(TOOLS) go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv $(TOOLS)/staticcheck $@

$(MINIO):
	mkdir -p $(TOOLS)
	GOBIN=$(TOOLS) go install github.com/minio/minio@$(MINIO_VERSION)
	mv $(TOOLS)/minio $@

# The local emulator: dev/motoserver.py imports moto, so check what python3 can
# import rather than whether a moto_server command is on PATH.
deps:
	@python3 -c 'import moto.server' 2>/dev/null || python3 -m pip install 'moto[server]'

clean:
	rm -rf bin .aws-sam coverage.out coverage.html
