# lockgate — make demo (the flash-sale proof) and make test (everything CI runs).
SHELL := /bin/bash
GO ?= go
# Every Go module of the repo: the library first, then the modules of their own (the OpenTelemetry module, the
# framework adapters, the example, the fault rig, the benchmarks), found by their go.mod.
MODULES := . $(sort $(patsubst ./%/go.mod,%,$(shell find . -mindepth 2 -name go.mod -not -path './.git/*' -not -path '*/testdata/*')))
USERS ?= 300
DUP ?= 8
STOCK ?= 200

.PHONY: test vet redis demo seckill proto bench bench-core torture failover

## test: ensure redis-server, then go vet and go test -race in every module
test: redis
	@set -e; for m in $(MODULES); do \
		echo "== $$m: go vet"; (cd $$m && $(GO) vet ./...); \
		echo "== $$m: go test -race"; (cd $$m && $(GO) test -race -count=1 -timeout 12m ./...); \
	done

## redis: install redis-server with apt-get when missing (as root), else explain
redis:
	@scripts/ensure-redis.sh

## seckill: build the example service into bin/seckill
seckill:
	@mkdir -p bin
	cd example && $(GO) build -o ../bin/seckill ./cmd/seckill

## demo: 3 seckill nodes, local lock vs redis lock, side by side
demo: redis seckill
	@USERS=$(USERS) DUP=$(DUP) STOCK=$(STOCK) example/scripts/demo.sh

## proto: regenerate the Go code of the proto annotations
proto:
	@scripts/proto.sh

## torture: the fault-injection rig at full size (DURATION=10m; SEED=, TOPOLOGY=single|sentinel|redlock, WORKERS=6, KEYS=3)
DURATION ?= 10m
TOPOLOGY ?= single
WORKERS ?= 6
KEYS ?= 3
SEED ?= 0
torture: redis
	@mkdir -p bin
	cd torture && $(GO) build -o ../bin/torture ./cmd/torture
	bin/torture run -duration $(DURATION) -topology $(TOPOLOGY) -workers $(WORKERS) -keys $(KEYS) -seed $(SEED)

## failover: measure locks across Sentinel failovers with and without WithReplicaAck (ROUNDS=10, about 2 minutes)
ROUNDS ?= 10
failover: redis
	LOCKGATE_FAILOVER_ROUNDS=$(ROUNDS) $(GO) test -count=1 -timeout 30m -run TestFailoverKeepsAcknowledgedLocks -v ./core/ | grep -E 'rounds:|^(---|ok|FAIL)'

## bench: lockgate and its Go peers side by side (bench/ module; about 10 minutes), writes bench/RESULTS.md
bench: redis
	cd bench && $(GO) run ./cmd/bench -out RESULTS.md

## bench-core: core's own Go benchmarks (floor, lock/unlock, contended)
bench-core: redis
	$(GO) test -run '^$$' -bench . -benchtime 3s ./core/
