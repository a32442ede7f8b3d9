# logd Makefile. `make run` starts the embedded single-node server;
# `make test` is what CI runs.
GO      ?= go
BIN     := bin
PKGS    := ./...
# The short fuzz pass in `make test` counts executions, not seconds: Go's
# fuzz coordinator can report a bare "context deadline exceeded" when a
# duration runs out while a worker is mid-input (go.dev/issue/75804, fixed
# only in Go 1.27), which failed CI with no crasher. A count has no deadline.
FUZZTIME ?= 2000x

.PHONY: bench-groups all build release run test test-under-load test-tools vet lint bench bench-system fuzz fuzz-short generate tools clean cluster cluster-secure cluster-stop fault demo console-screenshots

all: build

# Version stamping (internal/buildinfo): the linker sets what
# debug.ReadBuildInfo cannot give when the go command records no VCS
# information (-buildvcs=false, a source archive).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
DATE    ?= $(shell git log -1 --format=%cI 2>/dev/null || echo unknown)
BUILDINFO := github.com/logd-dev/logd/internal/buildinfo
LDFLAGS := -X $(BUILDINFO).version=$(VERSION) -X $(BUILDINFO).commit=$(COMMIT) -X $(BUILDINFO).date=$(DATE)

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/logd ./cmd/logd
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/logctl ./cmd/logctl

# Release binaries: static logd and logctl for each platform, stamped with
# the version, in dist/ with SHA256SUMS. Not part of make test.
PLATFORMS := linux/amd64 linux/arm64 darwin/arm64
DIST := dist

release:
	rm -rf $(DIST) && mkdir -p $(DIST)
	@set -e; for p in $(PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; \
		for cmd in logd logctl; do \
			out=$(DIST)/$$cmd-$(VERSION)-$$os-$$arch; \
			echo "$$out"; \
			CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" -o $$out ./cmd/$$cmd; \
		done; \
	done
	cd $(DIST) && sha256sum logd-* logctl-* > SHA256SUMS
	@cat $(DIST)/SHA256SUMS

# Refuses to start over a running node (scripts/run.sh).
run: build
	@scripts/run.sh

# The walk-through: starts bin/logd in a temporary directory and runs the
# stories of cmd/logd-demo with assertions; exits non-zero if one fails.
demo: build
	$(GO) run ./cmd/logd-demo --logd $(BIN)/logd

# A local three-node cluster: API on 7070/7080/7090, Raft on 7071/7081/7091,
# data in ./data/cluster/nN (scripts/cluster.sh). It refuses to start over
# a running node or over data it did not create; cluster-stop stops only
# the nodes it started (their PID files).
cluster: build
	@scripts/cluster.sh start

# The same cluster with TLS on the API and between nodes, client
# certificates and --auth required; certificates from bin/logd cert in
# ./data/cluster/certs (docs/security.md).
cluster-secure: build
	@scripts/cluster.sh start --secure

cluster-stop:
	@scripts/cluster.sh stop

# The long versions of the end-to-end fault tests (cmd/logd/*_e2e_test.go);
# the nemesis tests share LOGD_NEMESIS_DURATION (default 20m). The
# control-plane simulation runs at 200 nodes (replication/placement).
# go test already runs every fuzz target over its seeds and committed
# corpus (testdata/fuzz) in make test; new random inputs are searched here
# (fuzz-short) and in make fuzz: each target's fuzzing build compiles every
# dependency again with coverage instrumentation, minutes on an empty build
# cache.
# A failed end-to-end test leaves its nodes' whole output under
# $LOGD_E2E_LOGS (default $TMPDIR/logd-fault-logs/TestName/ID.log).
# Every stage runs even when an earlier one fails (a failure in cmd/logd
# would otherwise hide the later stages); the target fails if any did, and
# names them.
fault: test-tools fuzz-short
	@failed=""; \
	LOGD_FAULT_LONG=1 LOGD_E2E_LOGS=$${LOGD_E2E_LOGS:-$${TMPDIR:-/tmp}/logd-fault-logs} $(GO) test -race -count=1 -timeout 90m -run 'Cluster|Kill|Restart|Abuse|Nemesis|PowerCut|Failpoint|SlowDisk|Clock|Kafka|BenchSystem' -v ./cmd/logd/ || failed="$$failed cmd/logd"; \
	LOGD_FAULT_LONG=1 $(GO) test -race -count=1 -timeout 20m -run 'Churn' -v ./kafka/ || failed="$$failed kafka"; \
	LOGD_FAULT_LONG=1 $(GO) test -race -count=1 -run Scale -v ./console/ || failed="$$failed console"; \
	LOGD_FAULT_LONG=1 $(GO) test -race -count=1 -run 'TestRestoreReplays' -v ./replication/fsm/ || failed="$$failed replication/fsm"; \
	LOGD_FAULT_LONG=1 $(GO) test -race -count=1 -run 'TestSimulated' -v ./replication/placement/ || failed="$$failed replication/placement"; \
	if [ -n "$$failed" ]; then echo "make fault: failed in$$failed"; exit 1; fi; \
	echo "make fault: every stage passed"

# vet builds with -race so that the packages it compiles for type
# information are the ones go test -race compiles next: on an empty build
# cache every dependency (modernc's SQLite among them) is compiled once,
# not once per configuration.
vet:
	$(GO) vet -race $(PKGS)

# staticcheck with its default checks, pinned by the tool directive of
# tools/go.mod (a module of its own, so go.mod names none of it): the
# first build fetches it from the module proxy and checks it against
# tools/go.sum; the binary, built without -race, goes to bin/. staticcheck
# loads the packages it checks through go list -export, which compiles
# them; under GOFLAGS=-race that is the race build vet has just made, so a
# fresh machine compiles the module once, not twice. It runs in every make
# test: with its cache warm (the build cache and staticcheck's own, both
# under ~/.cache) a run over ./... takes 2 to 6 s; on an empty
# staticcheck cache after vet -race it costs 1.5 CPU-minutes of analysis
# (49 s of wall time on a busy 2-core machine; without GOFLAGS=-race
# another 2.5 CPU-minutes went into compiling everything again). No check
# is switched off; the few findings kept on purpose carry a //lint:ignore
# comment with the reason. Then tsc type-checks the web console's
# JavaScript (scripts/check-console.sh, under a second with the tsc that
# tools/package-lock.json pins and test-tools installs).
# deadcode (golang.org/x/tools/cmd/deadcode -test=false ./...) is an audit
# to run by hand, not a step: what it lists includes the API that users of
# client/, inbox/ and outbox/ call and the helpers only tests import
# (logdtest, internal/faults, ...), which no gate could tell from dead code.
lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) build -modfile=tools/go.mod -o $(BIN)/staticcheck honnef.co/go/tools/cmd/staticcheck
	GOFLAGS=-race $(BIN)/staticcheck $(PKGS)
	@scripts/check-console.sh

# The client tools the tests run (kcat; node, npm and the pinned kafkajs)
# and the pinned tsc lint runs, installed only when missing (npm ci only
# when a lock file changed).
test-tools:
	@scripts/test-tools.sh

# A race-enabled binary sleeps 1 s at exit unless GORACE says otherwise;
# every test binary (and every logd the e2e tests start) paid it. A race
# still fails the run: the exit code stays 66.
test: test-tools lint
	GORACE="$${GORACE:-atexit_sleep_ms=0}" $(GO) test -race -count=1 -timeout 15m $(PKGS)

# The timing-sensitive packages (cmd/logd, replication, kafka, console,
# server) under LOAD (default 4) busy loops per CPU at the tests' own
# priority, with the go test timeout scaled to the load
# (scripts/test-under-load.sh; docs/faults.md, "A suite that holds under
# load"). Not part of make test: it takes several times as long.
test-under-load: test-tools
	@scripts/test-under-load.sh

# PNGs of the web console's pages at 1280x800 (docs/console.md), from a
# node with demo data, driven in headless Chromium (test-tools installs it).
console-screenshots: test-tools
	LOGD_CONSOLE_SCREENSHOTS=$(CURDIR)/docs/console $(GO) test -count=1 -run '^TestConsoleScreenshots$$' -v ./console/

# Every fuzz target over its committed corpus plus a bounded number of new inputs.
fuzz-short:
	@scripts/fuzz.sh $(FUZZTIME)

fuzz:
	@scripts/fuzz.sh 60s

bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

# The system benchmark table of docs/performance.md: fresh logd nodes (1,
# then 3) on 127.0.0.1 driven by logctl bench, with CPU per record and RSS
# from /proc (scripts/bench-system.sh). QUICK=1 for a short pass, PEERS=1
# to run ../shared/bench/peers.sh in the same run and print ratios.
bench-system:
	@scripts/bench-system.sh

# What idle Raft groups cost: three processes of G groups each (sessions,
# the cluster secret, raft-wal), CPU and RPC/s per process and disk per
# group (replication/groupcost_test.go). GROUPS and SEGMENT (raft-wal
# segment bytes) choose what to measure.
GROUPS ?= 12,48,96
SEGMENT ?= 4194304
bench-groups:
	LOGD_GROUP_COST=$(GROUPS) LOGD_GROUP_COST_SEGMENT=$(SEGMENT) $(GO) test -count=1 -timeout 30m -run 'TestGroupCost$$' -v ./replication/

# Regenerates api/logdv1 from api/logd/v1/logd.proto.
generate: tools
	PATH="$$PATH:$$($(GO) env GOPATH)/bin" protoc -I api \
	  --go_out=api --go_opt=module=github.com/logd-dev/logd/api \
	  --connect-go_out=api --connect-go_opt=module=github.com/logd-dev/logd/api \
	  logd/v1/logd.proto

tools:
	@command -v protoc >/dev/null || (apt-get update -qq && apt-get install -y -qq protobuf-compiler)
	$(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
	$(GO) install connectrpc.com/connect/cmd/protoc-gen-connect-go@v1.21.1

clean:
	rm -rf $(BIN)
