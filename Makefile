# graylb: make demo, make test (see README.md).
GO       ?= go
# Every Go module in the repository (the library and its side modules).
MODULES  := $(shell find . -name go.mod -not -path './.git/*' -exec dirname {} \; | sort)
FUZZTIME ?= 30s

.PHONY: test test-unit demo bench fuzz lint

## test: the full suite with -race over every module.
test: lint test-unit

test-unit:
	@set -e; for m in $(MODULES); do echo "== go test $$m"; (cd $$m && $(GO) test -race -count=1 ./...); done

## demo: the quickstart; needs nothing but Go.
demo:
	$(GO) run ./examples/quickstart

## bench: the root package's benchmarks (-benchmem), 1 and 2 CPUs.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -cpu 1,2 .

## fuzz: each fuzz target for FUZZTIME.
fuzz:
	@set -e; for t in $$($(GO) test -list '^Fuzz' . | grep '^Fuzz'); do \
		echo "== $$t"; $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) . ; done

## lint: gofmt check and go vet over every module.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
		if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	@set -e; for m in $(MODULES); do (cd $$m && $(GO) vet ./...); done
