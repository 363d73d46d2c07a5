# FlowFabric for Go. `make help` lists the targets.
SHELL := /usr/bin/env bash
GO    ?= go

.PHONY: help
help: ## List the targets.
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

.PHONY: deps
deps: ## Install a Valkey/Redis server if none is on PATH (Debian).
	@./scripts/install-deps.sh

.PHONY: demo
demo: deps ## Run the example flows end to end: ffrun dev (own Redis child), the example workers, two staged runs.
	$(GO) run ./cmd/ffdemo

# Packages whose tests talk to Valkey, run again against a cluster.
CLUSTER_PKGS := ./runtime/store ./runtime/scanner ./runtime/scheduler ./runtime/server ./runtime/worker

# In cluster mode (no -race) parallel tests of one package run four at a
# time, not GOMAXPROCS (two on CI's machine): many of them wait (on
# retries that give up, on a Valkey that was stopped, on lease expiry), and
# two at a time left the cores idle. Under -race the cores are busy anyway.
TEST_PARALLEL ?= 4

.PHONY: test
test: deps lint check-generated ## Run every test against a real server, then the Valkey suites in cluster mode (what CI runs).
	$(GO) test -race -timeout 9m ./...
	$(MAKE) --no-print-directory test-cluster

.PHONY: test-cluster
test-cluster: deps ## Run the Valkey suites against a single-node cluster (FF_TEST_CLUSTER=1): any call across hash slots fails.
	FF_TEST_CLUSTER=1 $(GO) test -parallel $(TEST_PARALLEL) -timeout 5m $(CLUSTER_PKGS)

.PHONY: lint
lint: ## gofmt, go vet and staticcheck (a pinned version, fetched through the Go proxy).
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v /testdata/)); \
	  if [ -n "$$out" ]; then echo "not gofmt-formatted:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

.PHONY: generate
generate: ## Regenerate committed generated code (examples).
	$(GO) generate ./...

.PHONY: check-generated
check-generated: generate ## Fail when regenerating changes a committed generated file.
	@files=$$(git grep -l '^// Code generated .* DO NOT EDIT\.$$' -- '*.go'); \
	  git diff --exit-code --stat -- $$files || { echo "generated code is stale: run make generate and commit"; exit 1; }

.PHONY: bench
bench: deps ## Run the benchmarks (not part of the tests).
	$(GO) test -run '^$$' -bench . -benchmem ./compiler/... ./gen/...
	$(GO) run ./cmd/ffbench

.PHONY: update-golden
update-golden: ## Rewrite golden files after an intended change.
	$(GO) test ./compiler ./gen ./internal/ffc -update
