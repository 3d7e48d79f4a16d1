SHELL := /bin/bash
# graylb: make demo, make test (see README.md).
GO       ?= go
# Each module is built and tested against its own go.mod (the versions it declares), not the
# development workspace (go.work).
export GOWORK := off
# Every Go module in the repository (the library and its side modules).
MODULES  := $(shell find . -name go.mod -not -path './.git/*' -exec dirname {} \; | sort)
FUZZTIME ?= 30s
# The oldest Go the root module (core + httpctx) declares; make test runs its tests with it too
# (the go command fetches that toolchain from the module proxy).
OLDEST_GO ?= go1.23.12

.PHONY: test test-unit test-reliability demo bench fuzz lint nacos-up nacos-down

NACOS_ADDR ?= 127.0.0.1:8848

## test: the full suite with -race over every module, with a local Nacos-compatible
## server (scripts/nacos.sh) for the integration tests. NACOS_HTTP_PORT moves that server (and
## the cluster test's nodes, at NACOS_HTTP_PORT + 10000) to other ports.
test: lint
	@echo "== go test . with the oldest Go the root module declares ($(OLDEST_GO))"
	@GOTOOLCHAIN=$(OLDEST_GO) $(GO) test -count=1 ./...
	@scripts/nacos.sh start
	@set -e; trap '$(CURDIR)/scripts/nacos.sh stop' EXIT; \
	for m in $(MODULES); do echo "== go test $$m"; \
		(cd $$m && $(GO) test -race -count=1 -timeout 10m ./...); done; \
	addr=$${NACOS_HTTP_PORT:+127.0.0.1:$$NACOS_HTTP_PORT}; addr=$${addr:-$(NACOS_ADDR)}; \
	echo "== go test ./nacos integration (real Nacos at $$addr; without -race, see nacos/integration_test.go)"; \
	(cd nacos && GRAYLB_NACOS_ADDR=$$addr GRAYLB_NACOS_SCRIPT=$(CURDIR)/scripts/nacos.sh \
		$(GO) test -count=1 -timeout 10m -run Integration -v .); \
	echo "== go test ./deploytest: deployment flows under load (real Nacos at $$addr; without -race)"; \
	cd deploytest && GRAYLB_NACOS_ADDR=$$addr GRAYLB_NACOS_SCRIPT=$(CURDIR)/scripts/nacos.sh \
		$(GO) test -count=1 -timeout 5m -v .

## test-reliability: churn 30s, chaos, cluster and the deployment flows against Nacos, each fuzz
## target FUZZTIME; writes RELIABILITY.md.
test-reliability:
	FUZZTIME=$(FUZZTIME) scripts/reliability.sh

## test-unit: the suite without a Nacos server (integration tests skip).
test-unit:
	@set -e; for m in $(MODULES); do echo "== go test $$m"; (cd $$m && $(GO) test -race -count=1 ./...); done

## demo: the quickstart; needs nothing but Go.
demo:
	cd examples && $(GO) run ./quickstart

## bench: the root package's benchmarks (-benchmem, 1 and 2 CPUs), then every peer side by side
## (bench/ module) against a local Nacos: writes BENCHMARKS.md and docs/bench-pick.png.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -cpu 1,2 .
	@scripts/nacos.sh start
	@trap '$(CURDIR)/scripts/nacos.sh stop' EXIT; cd bench && $(GO) run ./cmd/report -out $(CURDIR) -nacos $(NACOS_ADDR)

## fuzz: each fuzz target for FUZZTIME.
fuzz:
	@set -e; for t in $$($(GO) test -list '^Fuzz' . | grep '^Fuzz'); do \
		echo "== $$t"; $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) . ; done

## lint: gofmt, go vet and staticcheck over every module.
STATICCHECK_VERSION ?= v0.8.2
STATICCHECK := $(CURDIR)/.bin/staticcheck
lint: $(STATICCHECK)
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
		if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	@set -e; for m in $(MODULES); do (cd $$m && $(GO) vet ./... && $(STATICCHECK) ./...); done

$(STATICCHECK):
	GOBIN=$(CURDIR)/.bin $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

## nacos-up / nacos-down: start or stop the local Nacos-compatible server.
nacos-up:
	scripts/nacos.sh start
nacos-down:
	scripts/nacos.sh stop
