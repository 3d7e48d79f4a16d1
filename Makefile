SHELL := /bin/bash
# graylb: make demo, make test (see README.md).
GO       ?= go
# Each module is built and tested against its own go.mod (the lowest versions it declares, which
# are what a user installing it from a tag gets), with the modules of this repository it requires
# taken from this tree: IN (scripts/inmodule.sh DIR COMMAND) runs COMMAND in module DIR against a
# copy of DIR/go.mod that replaces each sibling module by its directory. Not the repository's
# go.work, which serves editors: it selects one version of each dependency for all modules
# together, the highest any requires.
export GOWORK := off
IN       := scripts/inmodule.sh
# Every Go module in the repository (the library and its side modules), each after the modules
# of the repository it requires.
MODULES  := $(shell scripts/modules.sh | cut -d' ' -f1)
FUZZTIME ?= 30s
# The oldest Go the root module (core + httpctx) declares and the newest Go release; make test
# runs the root module's tests with each of them too (the go command fetches a toolchain it does
# not have from the module proxy).
OLDEST_GO ?= go1.23.12
NEWEST_GO ?= go1.27.4

.PHONY: test test-unit test-allocs test-install test-reliability demo demo-shadow demo-kafka bench bench-kafka bench-shadow fuzz lint tidy work release nacos-up nacos-down kafka-up kafka-down interop-jars

NACOS_ADDR ?= 127.0.0.1:8848
# The Kafka broker the kafkagray flows run against (scripts/kafka.sh; its controller on KAFKA_PORT + 1).
KAFKA_PORT ?= 19092
export KAFKA_PORT
# scripts/kafka.sh cluster-start 3: brokers at KAFKA_PORT + 1000, + 1010, + 1020.
KAFKA_CLUSTER = $(shell p=$(KAFKA_PORT); echo 127.0.0.1:$$((p + 1000)),127.0.0.1:$$((p + 1010)),127.0.0.1:$$((p + 1020)))

## test: the full suite with -race over every module, and every allocation test without it
## (test-allocs), with a local Nacos-compatible server (scripts/nacos.sh) for the integration
## tests. NACOS_HTTP_PORT moves that server (and the cluster test's nodes, at NACOS_HTTP_PORT +
## 10000) to other ports. Then an Apache Kafka broker (scripts/kafka.sh, KAFKA_PORT) for
## kafkagray's deployment flows.
test: lint
	@echo "== go test . with the oldest Go the root module declares ($(OLDEST_GO))"
	@GOTOOLCHAIN=$(OLDEST_GO) $(GO) test -count=1 ./...
	@echo "== go test . with the newest Go ($(NEWEST_GO))"
	@GOTOOLCHAIN=$(NEWEST_GO) $(GO) test -count=1 ./...
	@$(MAKE) --no-print-directory test-allocs
	@$(MAKE) --no-print-directory test-install
	@$(MAKE) --no-print-directory interop-jars
	@scripts/nacos.sh start
	@set -e; trap '$(CURDIR)/scripts/nacos.sh stop' EXIT; \
	for m in $(MODULES); do echo "== go test $$m"; \
		$(IN) $$m $(GO) test -race -count=1 -timeout 10m ./...; done; \
	addr=$${NACOS_HTTP_PORT:+127.0.0.1:$$NACOS_HTTP_PORT}; addr=$${addr:-$(NACOS_ADDR)}; \
	echo "== go test ./nacos integration (real Nacos at $$addr; without -race, see nacos/integration_test.go)"; \
	GRAYLB_NACOS_ADDR=$$addr GRAYLB_NACOS_SCRIPT=$(CURDIR)/scripts/nacos.sh \
		$(IN) nacos $(GO) test -count=1 -timeout 10m -run Integration -v .; \
	echo "== go test ./kratos/nacos integration (real Nacos at $$addr; without -race)"; \
	GRAYLB_NACOS_ADDR=$$addr $(IN) kratos $(GO) test -count=1 -timeout 5m -run Integration -v ./nacos; \
	echo "== go test ./deploytest: deployment flows under load (real Nacos at $$addr; without -race)"; \
	GRAYLB_NACOS_ADDR=$$addr GRAYLB_NACOS_SCRIPT=$(CURDIR)/scripts/nacos.sh \
		$(IN) deploytest $(GO) test -count=1 -timeout 5m -v .; \
	echo "== go test ./interoptest: graylb among the seeds' Java services, chains both ways and flows under load (real Nacos at $$addr; without -race)"; \
	GRAYLB_NACOS_ADDR=$$addr $(IN) interoptest $(GO) test -count=1 -timeout 15m -run TestJavaEstate -v .; \
	echo "== go test ./cmd/graylb: the command and a rollout against Nacos, Prometheus and Redis (without -race)"; \
	GRAYLB_NACOS_ADDR=$$addr $(IN) cmd/graylb $(GO) test -count=1 -timeout 5m -run Integration -v .; \
	echo "== go test ./docs Nacos snippets (real Nacos at $$addr; without -race)"; \
	GRAYLB_NACOS_ADDR=$$addr $(IN) docs $(GO) test -count=1 -timeout 5m -run Nacos -v .; \
	echo "== go test ./gozero: a go-zero chain over the Nacos supplier (real Nacos at $$addr; without -race)"; \
	GRAYLB_NACOS_ADDR=$$addr $(IN) gozero $(GO) test -count=1 -timeout 5m -run Integration -v .; \
	echo "== go test ./badbuildtest: bad gray builds rolled out with real processes (examples/rollout, Prometheus, graylb rollout), with and without a shadow phase first, the short plans (real Nacos at $$addr; without -race)"; \
	GRAYLB_NACOS_ADDR=$$addr $(IN) badbuildtest $(GO) test -count=1 -timeout 10m -v .; \
	echo "== go test ./faulttest: network faults on each link through Toxiproxy, the short plan (real Nacos at $$addr; without -race)"; \
	scripts/toxiproxy.sh start; trap '$(CURDIR)/scripts/nacos.sh stop; $(CURDIR)/scripts/toxiproxy.sh stop' EXIT; \
	GRAYLB_NACOS_ADDR=$$addr GRAYLB_TOXIPROXY_ADDR=127.0.0.1:$${TOXIPROXY_PORT:-8474} \
		$(IN) faulttest $(GO) test -count=1 -parallel 3 -timeout 5m -v .
	@scripts/kafka.sh start
	@scripts/kafka.sh cluster-start 3
	@set -e; trap '$(CURDIR)/scripts/kafka.sh stop; $(CURDIR)/scripts/kafka.sh cluster-stop 3' EXIT; \
	echo "== go test ./kafkagray: records by kind through deployment flows (real Kafka at 127.0.0.1:$(KAFKA_PORT), a 3-broker cluster at $(KAFKA_CLUSTER))"; \
	GRAYLB_KAFKA_ADDR=127.0.0.1:$(KAFKA_PORT) GRAYLB_KAFKA_CLUSTER=$(KAFKA_CLUSTER) GRAYLB_KAFKA_SCRIPT=$(CURDIR)/scripts/kafka.sh \
		$(IN) kafkagray $(GO) test -race -count=1 -timeout 10m -run TestKafkaFlows -v .; \
	echo "== go test ./interoptest: Spring Kafka producers and consumers beside kafkagray's (real Kafka at 127.0.0.1:$(KAFKA_PORT))"; \
	GRAYLB_KAFKA_ADDR=127.0.0.1:$(KAFKA_PORT) $(IN) interoptest $(GO) test -count=1 -timeout 5m -run TestJavaKafka -v .; \
	echo "== go test ./docs Kafka snippets (real Kafka at 127.0.0.1:$(KAFKA_PORT))"; \
	GRAYLB_KAFKA_ADDR=127.0.0.1:$(KAFKA_PORT) $(IN) docs $(GO) test -count=1 -timeout 5m -run Kafka -v .; \
	echo "== examples/kafka: an HTTP edge → a record → a prod and a gray consumer → HTTP, gray end to end (real Kafka at 127.0.0.1:$(KAFKA_PORT))"; \
	$(IN) examples $(GO) run ./kafka -brokers 127.0.0.1:$(KAFKA_PORT)

## test-install: every module installs from a tag as users install it: the committed HEAD, tagged
## by scripts/release.sh in a temporary copy, fetched with go get from a user module outside the
## repository, and a program of each module built and run (scripts/install-test.sh).
test-install:
	@echo "== every module installs from a tag (scripts/install-test.sh)"
	@scripts/install-test.sh
	@echo "== a new module uses the modules from this checkout (scripts/use-checkout.sh)"
	@scripts/use-checkout-test.sh

## interop-jars: the Java applications of interoptest (interoptest/java: Spring Boot 3.5, Spring
## Cloud 2025.0, Spring Cloud Alibaba), built with Maven into their target/ folders when a source
## changed; the dependencies come from Maven Central into ~/.m2 once, reused afterwards.
INTEROP_STAMP := interoptest/java/apps/target/.built
interop-jars: $(INTEROP_STAMP)
$(INTEROP_STAMP): $(shell find interoptest/java -path '*/target' -prune -o -type f \( -name '*.java' -o -name '*.yml' -o -name pom.xml \) -print)
	@echo "== the Java estate's jars (mvn -B package in interoptest/java)"
	@cd interoptest/java && mvn -B -q -Dstyle.color=never package -DskipTests
	@touch $@

## test-reliability: churn 30s, chaos, cluster and the deployment flows against Nacos, the bad gray
## builds (full plans, with and without a shadow phase), each fuzz target FUZZTIME; writes RELIABILITY.md.
test-reliability:
	FUZZTIME=$(FUZZTIME) scripts/reliability.sh

## test-unit: the suite without a Nacos server (integration tests skip), and test-allocs.
test-unit: test-allocs
	@set -e; for m in $(MODULES); do echo "== go test $$m"; $(IN) $$m $(GO) test -race -count=1 ./...; done

## test-allocs: every test that counts allocations (each Test function calling
## testing.AllocsPerRun, in every module), without -race: under it they skip
## (scripts/alloctests.sh).
test-allocs:
	@scripts/alloctests.sh

## demo: the quickstart; needs nothing but Go.
demo:
	$(IN) examples $(GO) run ./quickstart

## demo-shadow: the dark launch (examples/shadow); needs nothing but Go: an edge mirrors the prod
## GETs to orders to its gray build, compares the answers and never returns them; the writes the
## copies would make to the ledger are refused. Exits non-zero if a copy's write got through.
demo-shadow:
	$(IN) examples $(GO) run ./shadow

## demo-kafka: gray through Kafka (examples/kafka): starts the local broker (scripts/kafka.sh,
## KAFKA_PORT), runs the example (an HTTP edge produces, a prod and a gray consumer handle, each
## calls an HTTP service), stops the broker.
demo-kafka:
	@scripts/kafka.sh start
	@trap '$(CURDIR)/scripts/kafka.sh stop' EXIT; $(IN) examples $(GO) run ./kafka -brokers 127.0.0.1:$(KAFKA_PORT)

## bench: the root package's benchmarks (-benchmem, 1 and 2 CPUs), then every peer side by side
## (bench/ module) against a local Nacos, and a record through a local Kafka broker with and
## without kafkagray: writes BENCHMARKS.md and docs/bench-pick.png.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -cpu 1,2 .
	@scripts/nacos.sh start
	@trap '$(CURDIR)/scripts/nacos.sh stop; $(CURDIR)/scripts/kafka.sh stop' EXIT; scripts/kafka.sh start; \
	$(IN) bench $(GO) run ./cmd/report -out $(CURDIR) -nacos $(NACOS_ADDR) -kafka 127.0.0.1:$(KAFKA_PORT)

## bench-kafka: BENCHMARKS.md's Kafka section alone (a record through a local broker, plain
## franz-go against kafkagray), the rest of the file kept.
bench-kafka:
	@scripts/kafka.sh start
	@trap '$(CURDIR)/scripts/kafka.sh stop' EXIT; $(IN) bench $(GO) run ./cmd/report -out $(CURDIR) -only-kafka -kafka 127.0.0.1:$(KAFKA_PORT)

## bench-shadow: BENCHMARKS.md's shadow rows alone: the prod requests' p50 and p99 through httpctx's
## Transport at shadow share 0 and 10 %, in alternating rounds (bench/shadow.go, about 2 minutes).
bench-shadow:
	GRAYLB_SHADOW_BENCH=1 GRAYLB_SHADOW_OUT=$(CURDIR)/BENCHMARKS.md $(IN) bench $(GO) test -count=1 -timeout 10m -run '^TestShadowOverheadTable$$' -v .

## fuzz: each fuzz target of every module for FUZZTIME.
fuzz:
	@set -e; for m in $(MODULES); do \
		$(IN) $$m $(GO) test -list '^Fuzz' ./... | awk '/^Fuzz/ { t[n++] = $$0 } /^ok / { for (i = 0; i < n; i++) print $$2, t[i]; n = 0 }' | \
		while read -r p t; do echo "== $$p $$t"; $(IN) $$m $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$p </dev/null; done; done

## lint: gofmt, go vet and staticcheck over every module; every go.mod and go.sum tidy; go.work
## as scripts/gowork.sh writes it; scripts/repolint: no module imports another module's internal
## packages, the names doc comments refer to exist, and no doc comment is over 30 lines.
STATICCHECK_VERSION ?= v0.8.2
STATICCHECK := $(CURDIR)/.bin/staticcheck
lint: $(STATICCHECK)
	@scripts/gowork.sh -check
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
		if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	@$(GO) run ./scripts/repolint .
	@set -e; for m in $(MODULES); do $(IN) $$m sh -c '$(GO) vet ./... && $(STATICCHECK) ./...'; \
		$(IN) $$m $(GO) mod tidy -diff || { echo "$$m: go.mod or go.sum is not tidy (make tidy)"; exit 1; }; done

## tidy: go mod tidy in every module, each against its own go.mod (scripts/inmodule.sh writes
## the result back without the replace directives it adds).
tidy:
	@set -e; for m in $(MODULES); do echo "== go mod tidy $$m"; $(IN) $$m $(GO) mod tidy; done

## work: rewrite go.work, the development workspace, from the go.mod files (after adding a module).
work:
	scripts/gowork.sh

## release VERSION=v0.2.0: every module requires its siblings at VERSION, committed and tagged
## in this clone, in dependency order (scripts/release.sh). Pushing is the maintainer's step.
release:
	@test -n "$(VERSION)" || { echo "usage: make release VERSION=v0.2.0"; exit 2; }
	scripts/release.sh $(VERSION)

$(STATICCHECK):
	GOBIN=$(CURDIR)/.bin $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

## nacos-up / nacos-down: start or stop the local Nacos-compatible server.
nacos-up:
	scripts/nacos.sh start
nacos-down:
	scripts/nacos.sh stop

## kafka-up / kafka-down: start or stop the local Kafka broker (KRaft, loopback, KAFKA_PORT).
kafka-up:
	scripts/kafka.sh start
kafka-down:
	scripts/kafka.sh stop
