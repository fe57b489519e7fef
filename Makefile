# lockgate — make demo (the flash-sale proof) and make test (everything CI runs).
SHELL := /bin/bash
GO ?= go
# Every Go module of the repo: the library first, then the modules of their own (the OpenTelemetry module, the
# framework adapters, the example, the fault rig, the benchmarks), found by their go.mod.
MODULES := . $(sort $(patsubst ./%/go.mod,%,$(shell find . -mindepth 2 -name go.mod -not -path './.git/*' -not -path '*/testdata/*')))
# The repo's Go files for gofmt (generated code included: protoc-gen-go's output is gofmt-clean), testdata left out.
GOFILES = $(shell find . -name '*.go' -not -path './.git/*' -not -path './bin/*' -not -path '*/testdata/*')
# Tools built or installed by make, in the git-ignored bin/tools.
TOOLS := $(CURDIR)/bin/tools
TESTPROGRESS := $(TOOLS)/testprogress
STATICCHECK_VERSION ?= v0.8.2
STATICCHECK := $(TOOLS)/staticcheck
USERS ?= 300
DUP ?= 8
STOCK ?= 200

# `make` alone runs test (the first target below); `make help` lists the targets.
.PHONY: test help lint fmt staticcheck redis demo seckill proto bench bench-core torture torture-all failover

## test: (the default) ensure redis-server, then go vet and go test -race in every module, one at a time (TEST_JOBS=2: two)
# scripts/test.sh runs the modules, the longest first; go test -json goes through scripts/testprogress.go: a line
# as each package starts and ends (ok/FAIL, time; for a package of a minute or more its slowest tests), a
# heartbeat while go builds, and on FAIL the failed tests' output; a green run prints no test's output. It closes
# with the count of top-level tests of all modules: "tests: N passed, N failed, N skipped".
# Within a module the tests run side by side (TEST_PARALLEL, default 8: each has redis-servers of its own, and
# most of a fault test's time is waiting). One module at a time by default: two at a time took 1006s against 1075s
# one at a time on the loaded 2-core machine (before the tests ran side by side), and the fault tests' strict
# budgets then saw their processes go unscheduled.
TEST_JOBS ?= 1
# The longest first: the root module, the fault rig, the example, the benchmarks.
TEST_ORDER = . torture example bench $(filter-out . torture example bench,$(MODULES))
test: redis $(TESTPROGRESS)
	@TEST_JOBS=$(TEST_JOBS) TESTPROGRESS=$(TESTPROGRESS) GO=$(GO) scripts/test.sh $(TEST_ORDER)

$(TESTPROGRESS): scripts/testprogress.go
	@mkdir -p $(TOOLS)
	$(GO) build -o $@ scripts/testprogress.go

## help: list the make targets (`make` alone runs test)
help:
	@awk 'BEGIN { FS = ": " } /^## [a-z-]+: / { sub(/^## /, ""); t = $$1; sub(/^[^:]*: /, ""); printf "  %-11s %s\n", t, $$0 }' $(MAKEFILE_LIST)

## lint: gofmt -l (fails listing the files), go vet and staticcheck (installed into bin/tools on first use) in every module
# Every check runs in every module, then it fails if any did. make lint STATICCHECK= leaves staticcheck out (e.g.
# offline, where it cannot be installed).
lint: $(STATICCHECK)
	@rc=0; files=$$(gofmt -l $(GOFILES)); \
	if [ -n "$$files" ]; then echo "== gofmt: not formatted (make fmt fixes them):"; echo "$$files"; rc=1; else echo "== gofmt ok"; fi; \
	for m in $(MODULES); do echo "== $$m: go vet"; (cd $$m && $(GO) vet ./...) || rc=1; done; \
	if [ -n "$(STATICCHECK)" ]; then \
		for m in $(MODULES); do echo "== $$m: staticcheck"; (cd $$m && $(STATICCHECK) ./...) || rc=1; done; \
	else echo "== staticcheck left out (STATICCHECK is empty)"; fi; \
	if [ $$rc = 0 ]; then echo "== lint ok"; else echo "== lint FAILED (see above)"; fi; exit $$rc

## staticcheck: (re)install staticcheck (STATICCHECK_VERSION=v0.8.2) into bin/tools, git-ignored; make lint runs it
staticcheck:
	@rm -f $(TOOLS)/staticcheck
	@$(MAKE) --no-print-directory $(TOOLS)/staticcheck

$(TOOLS)/staticcheck:
	GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

## fmt: gofmt -w the repo's Go files (testdata left out)
fmt:
	@gofmt -l -w $(GOFILES)

## redis: install redis-server with apt-get when missing (as root), else explain
redis:
	@scripts/ensure-redis.sh

## seckill: build the example service into bin/seckill
# go build -v names each package it compiles; a line every 25 of them shows progress (a fresh clone compiles a few
# hundred, minutes on two cores), and compiler errors pass through.
seckill:
	@mkdir -p bin
	@echo "== building bin/seckill (cd example && go build ./cmd/seckill)"
	@set -o pipefail; cd example && $(GO) build -v -o ../bin/seckill ./cmd/seckill 2>&1 | \
		awk '/^#|\.go:[0-9]+/ { print; next } { n++; if (n % 25 == 0) { print "   ... " n " packages compiled"; fflush() } }'

## demo: 3 seckill nodes, local lock vs redis lock, side by side
demo: redis seckill
	@USERS=$(USERS) DUP=$(DUP) STOCK=$(STOCK) example/scripts/demo.sh

## proto: regenerate the generated Go code: the proto annotations, the RPC suite's test service, the example's service
# The same as `go generate ./...` in the root and in example/ (the //go:generate lines in the generate.go files).
proto:
	@example/scripts/proto.sh # runs scripts/proto.sh (the root's and interceptor/connect's), then the example's

## torture: the fault-injection rig at full size (DURATION=10m; SEED=, TOPOLOGY=single|sentinel|redlock|cluster, WORKERS=6, KEYS=12, CROWD=30, MULTI=0: % of requests taking 2-3 keys with LockMulti, SEM=0: % of requests taking a permit of a semaphore of PERMITS=3, RW=0: % of requests taking a read-write lock, 3 in 4 as readers; neither on redlock)
DURATION ?= 10m
TOPOLOGY ?= single
WORKERS ?= 6
KEYS ?= 12
CROWD ?= 30
MULTI ?= 0
SEM ?= 0
PERMITS ?= 3
RW ?= 0
SEED ?= 0
torture: redis
	@mkdir -p bin
	cd torture && $(GO) build -o ../bin/torture ./cmd/torture
	bin/torture run -duration $(DURATION) -topology $(TOPOLOGY) -workers $(WORKERS) -keys $(KEYS) -crowd $(CROWD) -multi $(MULTI) -sem $(SEM) -permits $(PERMITS) -rw $(RW) -seed $(SEED)

## torture-all: the rig at full size on each of the four topologies in turn (DURATION=10m each)
torture-all: redis
	@set -e; for t in single sentinel redlock cluster; do $(MAKE) --no-print-directory torture TOPOLOGY=$$t; done

## failover: measure locks across failovers: Sentinel with and without WithReplicaAck (ROUNDS=10), then what a refused dial gets on Sentinel and Cluster (REFUSAL_ROUNDS=5); about 5 minutes
ROUNDS ?= 10
REFUSAL_ROUNDS ?= 5
failover: redis
	LOCKGATE_FAILOVER_ROUNDS=$(ROUNDS) $(GO) test -count=1 -timeout 30m -run TestFailoverKeepsAcknowledgedLocks -v ./core/ | grep -E 'rounds:|^(---|ok|FAIL)'
	LOCKGATE_FAILOVER_ROUNDS=$(REFUSAL_ROUNDS) $(GO) test -count=1 -timeout 30m -run TestRefusalDuringFailover -v ./core/ | grep -E 'rounds:|^(---|ok|FAIL)'

## bench: lockgate and its Go peers side by side, on one server and on a 3-master Cluster (bench/ module; about 22 minutes), writes bench/RESULTS.md
bench: redis
	cd bench && $(GO) run ./cmd/bench -out RESULTS.md

## bench-core: core's own Go benchmarks (floor, lock/unlock, contended)
bench-core: redis
	$(GO) test -run '^$$' -bench . -benchtime 3s ./core/
