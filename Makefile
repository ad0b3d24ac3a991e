# fleetbench Makefile. `make help` lists the targets.
#
# Tools are pinned and installed on first use into $(TOOLS_DIR), outside the
# repository, so a fresh machine (or CI on a clean clone) installs what it
# needs and later runs reuse it.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO        ?= go
TOOLS_DIR ?= $(HOME)/.cache/fleetbench/tools
TOOLS_BIN := $(TOOLS_DIR)/bin
export PATH := $(TOOLS_BIN):$(PATH)

GOLANGCI_LINT_VERSION      := v2.15.0
BUF_VERSION                := 1.75.0
PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)

GOLANGCI_LINT      := $(TOOLS_BIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
BUF                := $(TOOLS_DIR)/node_modules/.bin/buf
PROTOC_GEN_GO      := $(TOOLS_BIN)/protoc-gen-go
PROTOC_GEN_GO_GRPC := $(TOOLS_BIN)/protoc-gen-go-grpc

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*?## "} /^[a-zA-Z0-9_-]+:.*?## / {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## build bin/fleetbench
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/fleetbench .

# The image's platforms; the binary is pure Go, so each is a cross build.
IMAGE_PLATFORMS ?= linux/amd64 linux/arm64

# Where make image writes the OCI layout.
IMAGE_OUT ?= out/image

.PHONY: image
image: ## build the OCI image into out/image without Docker; IMAGE=registry/repo:tag also pushes it
	@args=""; for p in $(IMAGE_PLATFORMS); do os=$${p%/*}; arch=$${p#*/}; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o out/image-build/fleetbench-$$os-$$arch . ; \
	  args="$$args --binary $$p=out/image-build/fleetbench-$$os-$$arch"; done; \
	  $(GO) run ./deploy/image $$args --version '$(VERSION)' --revision "$$(git rev-parse HEAD 2>/dev/null || echo unknown)" \
	    --out $(IMAGE_OUT) $(if $(IMAGE),--push '$(IMAGE)')

# The end-to-end tests' image: this tree, for this machine's platform only,
# loaded into the real node's containerd under E2E_IMAGE (pods use
# imagePullPolicy IfNotPresent: nothing is pulled).
E2E_IMAGE ?= fleetbench.local/fleetbench:e2e

.PHONY: e2e-image
e2e-image:
	@$(MAKE) --no-print-directory image IMAGE_PLATFORMS=linux/$$($(GO) env GOARCH) IMAGE_OUT=out/e2e-image IMAGE=

# E2E_TESTS runs the end-to-end tests (deploy/examples/sim as a Job on the
# real node, an agent pod killed, an agent OOM-killed) against the
# environment in $$FLEETBENCH_KUBE_DIR; without the race detector, alone:
# they load the machine.
define E2E_TESTS
FLEETBENCH_KUBE_DIR=$$dir scripts/kube-env.sh load-image out/e2e-image $(E2E_IMAGE); \
  FLEETBENCH_KUBECONFIG=$$dir/admin.kubeconfig FLEETBENCH_E2E_IMAGE=$(E2E_IMAGE) FLEETBENCH_REQUIRE_REAL_NODE=1 \
    $(GO) test -tags e2e -count=1 -timeout 20m -run '^TestE2E' -v .
endef

.PHONY: e2e
e2e: kube-build e2e-image ## run the end-to-end tests on a real node: image, deploy/ manifests, agents as pods (~4 min; root)
	@dir=$$(mktemp -d -t fleetbench-e2e.XXXXXX); \
	  trap 'FLEETBENCH_KUBE_DIR='"$$dir"' scripts/kube-env.sh stop' EXIT; \
	  scripts/kube-env.sh install-node; \
	  FLEETBENCH_KUBE_DIR=$$dir FLEETBENCH_KUBE_REAL_NODE=1 scripts/kube-env.sh start >/dev/null; \
	  $(E2E_TESTS)

# The test tiers (docs/testing.md). `make test` runs them all, in order,
# each under a banner with its elapsed time, then the times of all; a
# tier's own target runs it alone. The tagged tiers run only the tests of
# their tagged files (scripts/test-tiers.sh names them): the unit tests of
# the same packages run in the unit tier.
TIERS := lint unit integration e2e soak calibrate
rparen := )
tier_lint        := gofmt, go vet (every tag), golangci-lint, buf, import boundaries, generated code
tier_unit        := go test -race ./..., hermetic: no root, loopback only; the client again on blocking reads
tier_integration := separate processes, a real Prometheus, headless Chromium (-tags integration, -race)
tier_e2e         := a local control plane and a real node: the kube tests (-race), then the end-to-end Jobs (-tags e2e)
tier_soak        := the short soak: separate processes under faults (-tags soak)
tier_calibrate   := the short calibration of the simulator, alone (wall-clock latencies)

.PHONY: test
test: ## run every tier: lint, unit, integration, e2e, soak, calibrate (what .ci/run calls; first run ~25 min of installs)
	@GOLANGCI_LINT_VERSION=$(GOLANGCI_LINT_VERSION) TOOLS_DIR=$(TOOLS_DIR) scripts/test-tiers.sh notice
	@times=(); fmt() { printf '%dm%02ds' $$(($$1 / 60)) $$(($$1 % 60)); }; \
	  summary() { echo "== tiers:"; printf '==   %s\n' "$${times[@]}"; }; \
	  for t in $(TIERS); do \
	    case $$t in $(foreach t,$(TIERS),$(t)$(rparen) desc='$(tier_$(t))';;) esac; \
	    echo "== tier $$t: $$desc"; \
	    start=$$SECONDS; \
	    if ! $(MAKE) --no-print-directory test-$$t; then \
	      times+=("$$t: FAILED after $$(fmt $$((SECONDS - start)))"); echo "== tier $$t: FAILED"; summary; exit 1; \
	    fi; \
	    times+=("$$t: $$(fmt $$((SECONDS - start)))"); echo "== tier $$t: $$(fmt $$((SECONDS - start)))"; \
	  done; summary

.PHONY: check
check: lint ## lint and the unit tier with the race detector: the command to run before every commit
	$(GO) test -race -count=1 -timeout 30m ./...

.PHONY: test-lint
test-lint: lint check-generate ## the lint tier: lint and the generated-code check

.PHONY: test-unit
test-unit: ## the unit tier: go test -race ./... (no root, loopback only) and the client on blocking reads
	$(GO) test -race -count=1 -timeout 30m ./...
	@# The client's tests again on the blocking-read path (Config.BlockingReads).
	$(GO) test -race -count=1 ./pkg/client/ -args -blocking-reads

.PHONY: test-integration
test-integration: prometheus chromium ## the integration tier: separate processes, a real Prometheus, headless Chromium (installs both; root)
	FLEETBENCH_REQUIRE_PROMETHEUS=1 FLEETBENCH_REQUIRE_CHROMIUM=1 \
	  $(GO) test -tags integration -race -count=1 -timeout 30m -run '$(shell scripts/test-tiers.sh run integration)' $(shell scripts/test-tiers.sh pkgs integration)

.PHONY: test-e2e
test-e2e: kube-build e2e-image ## the e2e tier: a local control plane with a real node (builds it once; root)
	@dir=$$(mktemp -d -t fleetbench-kube.XXXXXX); \
	  trap 'FLEETBENCH_KUBE_DIR='"$$dir"' scripts/kube-env.sh stop' EXIT; \
	  scripts/kube-env.sh install-node; \
	  FLEETBENCH_KUBE_DIR=$$dir FLEETBENCH_KUBE_REAL_NODE=1 scripts/kube-env.sh start >/dev/null; \
	  FLEETBENCH_KUBECONFIG=$$dir/admin.kubeconfig FLEETBENCH_REQUIRE_KUBE=1 \
	    $(GO) test -tags e2e -race -count=1 -timeout 30m -run '$(shell scripts/test-tiers.sh run e2e)' -skip '^TestE2E' \
	      $(shell scripts/test-tiers.sh pkgs e2e); \
	  $(E2E_TESTS)

.PHONY: test-soak
test-soak: ## the soak tier, short variant: separate processes under faults, alone (~5 min)
	FLEETBENCH_SOAK=short $(GO) test -tags soak -count=1 -timeout 15m -run '^TestSoak$$' -v .

.PHONY: test-calibrate
test-calibrate: ## the calibrate tier: the simulator's short calibration, alone (its latencies are wall clock)
	FLEETBENCH_CALIBRATE=short $(GO) test -p 1 -count=1 -timeout 10m -run '^(TestCalibrate(Simulated)?|TestSaturation)$$' ./pkg/calibrate/

.PHONY: prometheus
prometheus: ## install Debian's prometheus package for the real Prometheus test, unless present (its service is not started)
	scripts/prometheus.sh install

.PHONY: chromium
chromium: ## install Debian's chromium package for the real headless-browser test of the dashboard, unless present
	scripts/chromium.sh install

.PHONY: kube-build
kube-build: ## build (once, cached outside the repo) the local Kubernetes control plane the tests use
	scripts/kube-env.sh build

.PHONY: test-short
test-short: ## run the unit tests without lint or the race detector
	$(GO) test -count=1 ./...

# benchtable keeps benchmark figures as data: `exec` runs one benchmark
# command, shows its output and keeps its figures (with the command and the
# FLEETBENCH_* knobs set) in a part; `record` joins a run's parts into
# bench/results/<date>-<commit>-<host>.json with the machine's facts;
# `table` regenerates docs/benchmarks.md from every results file.
BENCHTABLE := out/benchtable
BENCH_PARTS = out/parts-$@

# bench_start builds benchtable and empties the target's parts.
define bench_start
@$(GO) build -o $(BENCHTABLE) ./internal/benchresult/cmd/benchtable
@rm -rf $(BENCH_PARTS) && mkdir -p $(BENCH_PARTS)
endef

# bench_run N runs the rest of the line as the run's Nth benchmark command.
bench_run = $(BENCHTABLE) exec -part $(BENCH_PARTS)/$(1).json --

# bench_or_note, after a bench_run line, notes its failure and goes on: one
# failing benchmark does not cost the run's other figures.
bench_or_note = || echo "$(1)" >> $(BENCH_PARTS)/failed

# bench_record writes the run's results file and regenerates the table,
# then fails if a command failed.
define bench_record
$(BENCHTABLE) record -out bench/results $(BENCH_PARTS)/*.json
$(BENCHTABLE) table
@if [ -s $(BENCH_PARTS)/failed ]; then echo "failed benchmark commands: $$(cat $(BENCH_PARTS)/failed)"; exit 1; fi
endef

.PHONY: bench
bench: ## run the benchmarks, write bench/results/*.json and regenerate docs/benchmarks.md (about 25 minutes)
	$(bench_start)
	@# Hot-path micro benchmarks at the default bench time.
	$(call bench_run,01) $(GO) test -run='^$$' -bench=. -benchmem $$($(GO) list ./... | grep -v -e /coordinator -e /pkg/load -e /pkg/sim -e 'fleetbench/fleetbench$$') $(call bench_or_note,01)
	@# The live view's cost as whole runs: 3,200 sessions bare and with the dashboard open and
	@# /metrics scraped every second, 20 alternating pairs of 10 s windows, each run a process of its own (~16 min).
	$(call bench_run,02) $(GO) test -tags integration -run='^$$' -bench='LiveCost' -benchtime=1x -timeout 40m . $(call bench_or_note,02)
	@# The coordinator merging 100 agents' reports of 10 histograms over loopback gRPC, 500
	@# rounds: the agents in a child process so the figures (cpu-ns, alloc-B, allocs per
	@# report) are the coordinator's alone, with and without histograms, over one shared connection
	@# and with a connection per agent as deployed (-conn-each).
	$(call bench_run,03) $(GO) test -run='^$$' -bench='Merge100Agents' -benchmem -benchtime=500x ./coordinator/ $(call bench_or_note,03)
	@# One report's merge at the coordinator and what the Prometheus load metrics add to it.
	$(call bench_run,04) $(GO) test -run='^$$' -bench='MergeReport|ReportMetrics' -benchmem -benchtime=2000x ./coordinator/ $(call bench_or_note,04)
	@# One pass each of the 1,000-, 2,000- and 8,000-session load runs, net/http and encoding/json at
	@# 2,000 (client=nethttp: the plain path's A/B) and the 8,000-session epoll floor.
	$(call bench_run,05) $(GO) test -run='^$$' -bench=ClosedLoop -benchmem -benchtime=1x -timeout 30m ./pkg/load/ $(call bench_or_note,05)
	@# The agent at the floor (issue 15): fleetbench's engine beside the epoll floor client at 1,000 to
	@# 8,000 sessions, 3 runs each in alternating order (about 6 min); ratios are medians of per-run
	@# ratios. Quick: FLEETBENCH_FLOOR_LEVELS=1000,2000 FLEETBENCH_FLOOR_RUNS=1 FLEETBENCH_FLOOR_SECONDS=3.
	@# The criterion's own spread: FLEETBENCH_FLOOR_SELF=1 runs the floor against itself (A/A).
	@# A run past the knee (a client serving under 98% of the demand) logs each client's share and
	@# the wait Little's law gives for it, which the added TTFT then follows.
	$(call bench_run,06) $(GO) test -run='^$$' -bench=FloorRatio -benchtime=1x -timeout 30m ./pkg/load/ $(call bench_or_note,06)
	@# The simulator at 8,000 streams, then a bare net/http server streaming the same events at the same
	@# pace to the same client (floor-cpu-*: what this machine charges for the writes alone).
	$(call bench_run,07) $(GO) test -run='^$$' -bench=. -benchmem -benchtime=1x -timeout 30m ./pkg/sim/ $(call bench_or_note,07)
	$(bench_record)

.PHONY: bench-bundle
bench-bundle: ## build out/bench-bundle(.tar.gz), the benchmarks for a bigger Linux machine without Go (scripts/bench-bundle.sh), and run it here in --quick mode (~4 min)
	scripts/bench-bundle.sh out/bench-bundle
	out/bench-bundle/run.sh --quick

.PHONY: soak
soak: ## 8,000 sessions for 20 minutes through faults: agent kill -9, a cut connection, a stopped coordinator, simulator restarts (~24 min); writes bench/results/*.json
	$(bench_start)
	@# The soak's verdict and growth figures go into a results file, failed or not.
	status=0; FLEETBENCH_SOAK=full $(call bench_run,01) $(GO) test -tags soak -count=1 -timeout 40m -run '^TestSoak$$' -v . || status=$$?; \
	  $(BENCHTABLE) record -out bench/results $(BENCH_PARTS)/*.json && $(BENCHTABLE) table; exit $$status

.PHONY: calibrate
calibrate: ## run the published Dynamo sweep on the simulator and compare every cell, in wall time and in simulated time (~15 min); writes bench/results/*.json
	$(bench_start)
	@# The figures out of tolerance go into a results file, failed or not.
	status=0; FLEETBENCH_CALIBRATE=full $(call bench_run,01) $(GO) test -count=1 -timeout 40m -run '^(TestCalibrate(Simulated)?|TestSaturation)$$' -v ./pkg/calibrate/ || status=$$?; \
	  $(BENCHTABLE) record -out bench/results $(BENCH_PARTS)/*.json && $(BENCHTABLE) table; exit $$status

.PHONY: demo
demo: build ## sweep KV-aware routing against round robin on the built-in simulator (~3 min)
	rm -rf out/demo
	./bin/fleetbench sweep -f deploy/examples/demo-sweep.yaml --out out/demo

.PHONY: lint
lint: $(GOLANGCI_LINT) $(BUF) ## gofmt, go vet, golangci-lint, buf lint/format, import boundaries
	@bad=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$') 2>/dev/null); \
	  if [ -n "$$bad" ]; then echo "gofmt needed:"; echo "$$bad"; exit 1; fi
	$(GO) vet ./...
	@# Each tagged tier's files on their own, so a helper that one tier
	@# lacks fails here (golangci-lint sees every tag at once: .golangci.yml).
	@for t in integration e2e soak; do echo "$(GO) vet -tags $$t"; $(GO) vet -tags $$t $$(scripts/test-tiers.sh pkgs $$t); done
	$(GOLANGCI_LINT) run ./...
	@if [ -f buf.yaml ]; then $(BUF) lint && $(BUF) format -d --exit-code; fi
	@./scripts/check-imports.sh

.PHONY: generate
generate: $(BUF) $(PROTOC_GEN_GO) $(PROTOC_GEN_GO_GRPC) ## regenerate the protobuf Go code
	$(BUF) generate

.PHONY: check-generate
check-generate: generate ## fail when generated code is out of date
	@if [ -n "$$(git status --porcelain -- proto gen)" ]; then \
	  echo "generated code is stale; run 'make generate' and commit:"; git status --porcelain -- proto gen; exit 1; fi

.PHONY: tools
tools: $(GOLANGCI_LINT) $(BUF) $(PROTOC_GEN_GO) $(PROTOC_GEN_GO_GRPC) ## install the pinned tools

$(GOLANGCI_LINT):
	@mkdir -p $(TOOLS_BIN)
	GOBIN=$(TOOLS_BIN) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(TOOLS_BIN)/golangci-lint $@

$(BUF):
	@mkdir -p $(TOOLS_DIR)
	npm install --silent --no-audit --no-fund --prefix $(TOOLS_DIR) @bufbuild/buf@$(BUF_VERSION)

$(PROTOC_GEN_GO):
	@mkdir -p $(TOOLS_BIN)
	GOBIN=$(TOOLS_BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)

$(PROTOC_GEN_GO_GRPC):
	@mkdir -p $(TOOLS_BIN)
	GOBIN=$(TOOLS_BIN) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)

.PHONY: clean
clean: ## remove build output
	rm -rf bin out
