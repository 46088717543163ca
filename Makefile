# filepath — build, run and test. `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
BIN := bin/filepath
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
DATA ?= ./data
ADDR ?= 127.0.0.1:8080

.PHONY: help run build binary web images test go-test web-test e2e lint gen gen-check bench deps fuzz clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | column -t -s $$'\t'

run: deps-run build images ## build everything and serve on $(ADDR) with data in $(DATA)
	$(BIN) serve --addr $(ADDR) --data $(DATA)

build: web binary ## build the UI and the binary (bin/filepath, UI embedded)

binary:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/filepath

web: web/node_modules/.package-lock.json ## build the Svelte UI into web/build (installs its npm packages when missing)
	cd web && npm run build

# The UI's npm packages, installed (npm ci) when missing or older than the
# lock file; npm ci rewrites node_modules/.package-lock.json.
web/node_modules/.package-lock.json: web/package-lock.json web/package.json
	cd web && npm ci

images: ## build the agent images locally (no registry needed)
	images/build.sh

test: deps lint gen-check web-test images build go-test go-test-pg e2e ## everything CI runs

go-test: ## Go unit + integration tests (real SQLite, Docker, FUSE), with the race detector
	$(GO) test -race -count=1 -timeout 30m ./...

# The store and vfs suites again on PostgreSQL: the test process starts its
# own cluster (internal/testkit PostgresURL; postgresql-15 from deps). The
# long randomized and scaling tests of the vfs run on SQLite only, to keep
# this under ~3 minutes on 2 cores.
PG_SKIP = ^(TestForkRandom|TestLazyForkRandom|TestLazyForkReviewRandom|TestMergeRandomKeepsLinks|TestForkDiffMerge10k|TestDeepTreeLinear|TestPathLimit|TestRandom.*)$$
go-test-pg: ## the store and vfs suites on PostgreSQL (FILEPATH_TEST_DATABASE=postgres)
	FILEPATH_TEST_DATABASE=postgres $(GO) test -count=1 -timeout 20m -skip '$(PG_SKIP)' ./orchestrator/store/... ./orchestrator/vfs/...

web-test: web/node_modules/.package-lock.json ## component tests (vitest)
	cd web && npm test

e2e: web/node_modules/.package-lock.json ## end-to-end: the real binary, a real agent container, headless Chromium
	cd web && npm run e2e

lint: ## gofmt, go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

gen: web/node_modules/.package-lock.json ## regenerate the JSON Schemas, the OpenAPI document and the UI's TypeScript types from them
	$(GO) generate ./protocol/... ./orchestrator/api/...
	cd web && npm run gen

gen-check: web/node_modules/.package-lock.json ## fail when generated files are stale
	$(GO) test -count=1 -run 'TestCommittedSchemasAreCurrent' ./protocol/internal/schemagen/
	$(GO) test -count=1 -run 'TestCommittedOpenAPIIsCurrent' ./orchestrator/api/
	cd web && npm run gen:check

bench: ## benchmarks (numbers go to docs/benchmarks.md)
	$(GO) test -run '^$$' -bench . -benchtime 1x -count 1 ./... >/dev/null
	@echo "see docs/benchmarks.md for the commands behind each number"

fuzz: ## run every fuzz target for 60 s
	$(GO) test -run '^$$' -fuzz FuzzDecodeEvent -fuzztime 60s ./protocol/
	$(GO) test -run '^$$' -fuzz FuzzDecodeInput -fuzztime 60s ./protocol/
	$(GO) test -run '^$$' -fuzz FuzzReader -fuzztime 60s ./protocol/
	$(GO) test -run '^$$' -fuzz FuzzCleanPath -fuzztime 60s ./orchestrator/vfs/paths/

deps: ## install what the tests need (Debian packages, npm packages, dockerd)
	scripts/deps.sh

deps-run:
	scripts/deps.sh --run

clean:
	rm -rf bin web/build/_app web/build/*.html
