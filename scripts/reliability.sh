#!/usr/bin/env bash
# make test-reliability: the reliability figures, regenerated into RELIABILITY.md.
#   the test server's start-up (NACOS_STARTS fresh starts beside a build), churn 30 s under -race,
#   chaos (SIGKILL and restart of Nacos under HTTP load), a 3-node Nacos cluster losing a node, the
#   deployment flows (deploytest), the bad gray builds (badbuildtest, GRAYLB_BADBUILD_PLAN=full: the
#   canary's table, about 20 minutes, and the shadow phase's, about 15), a process's life against
#   Nacos (GRAYLB_LIFETIME=long, about six minutes), scale (100 000 services under churn for 10
#   minutes, names never real beside learning, 10 000 services over Nacos), and each fuzz target
#   for FUZZTIME.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
FUZZTIME=${FUZZTIME:-30s}
CHURN=${GRAYLB_CHURN_DURATION:-30s}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"; scripts/nacos.sh stop; scripts/toxiproxy.sh stop' EXIT
export GRAYLB_RELIABILITY_OUT=$OUT GRAYLB_NACOS_ADDR=${NACOS_ADDR:-127.0.0.1:8848} GRAYLB_NACOS_SCRIPT=$ROOT/scripts/nacos.sh
echo "== the test server's start-up: ${NACOS_STARTS:-30} fresh starts beside a build"
scripts/nacos.sh measure-starts "${NACOS_STARTS:-30}"
scripts/nacos.sh start

echo "== churn for $CHURN (-race)"
GRAYLB_CHURN_DURATION=$CHURN go test -race -count=1 -run '^TestChurn$' ./internal/engine
echo "== hostile input and trust: rules race, rule documents, trust boundaries, names, the gRPC full link"
go test -count=1 -run '^(TestSetRules_ReachesServiceBeingAdded|TestSetRules_RaceWithFirstUse|TestParseRules_RefusesDocumentsThatSilentlySwitchOff|TestLoadBalancer_UnknownNamesKeepMemoryBounded|TestInstance_ValidateRefusesInjection)$' ./internal/engine
go test -count=1 -run '^TestMiddleware_TrustBoundaryDropsEveryRoutingKey$' ./httpctx
(scripts/inmodule.sh grpcctx go test -count=1 -run '^(TestFullLink_TrustBoundaryDropsForgedDecision|TestFullLink_CanaryDecisionTravels)$' .)
echo "== chaos, cluster, refill versus deregistration, forged pushes (live and on disk), leaks against Nacos"
(scripts/inmodule.sh nacos go test -count=1 -timeout 15m -run 'TestIntegration_(ChaosHTTP|Cluster|DeliberateDeregistration|ForgedUDPPush|DiskCacheIsItsOwn|CloseLeaks|UnreachableFailsFast|KeysConfiguredOnce|ConsoleEditDoesNotOutliveARestart)$' .)

echo "== scale: 100 000 services under churn for 10 minutes (GRAYLB_SCALE=long); names never real beside learning"
GRAYLB_SCALE=long go test -count=1 -timeout 30m -run '^TestScale_(FlatHeapUnderChurn|UnknownNamesDoNotSlowLearning)$' -v ./internal/engine
echo "== scale over Nacos: 10 000 services on one Supplier (GRAYLB_NACOS_SCALE=long)"
(GRAYLB_NACOS_SCALE=long scripts/inmodule.sh nacos go test -count=1 -timeout 20m -run 'TestIntegration_Scale$' -v .)

echo "== deployment flows under load against Nacos: graceful, abrupt, rolling, restart, promotion, rollback"
(scripts/inmodule.sh deploytest go test -count=1 -timeout 10m -run '^TestDeploy_' .)

echo "== records by kind through deployment flows against a real Kafka broker (scripts/kafka.sh)"
kp=${KAFKA_PORT:-19092}
scripts/kafka.sh start
scripts/kafka.sh cluster-start 3
(GRAYLB_KAFKA_ADDR=127.0.0.1:$kp GRAYLB_KAFKA_SCRIPT=$ROOT/scripts/kafka.sh \
  GRAYLB_KAFKA_CLUSTER=127.0.0.1:$((kp + 1000)),127.0.0.1:$((kp + 1010)),127.0.0.1:$((kp + 1020)) \
  scripts/inmodule.sh kafkagray go test -count=1 -timeout 10m -run '^TestKafkaFlows$' .) || { scripts/kafka.sh stop; scripts/kafka.sh cluster-stop 3; exit 1; }
scripts/kafka.sh cluster-stop 3

echo "== graylb among the seeds' Java services (interoptest): chains, flows under load, Spring Kafka"
make --no-print-directory interop-jars
(GRAYLB_INTEROP_COMPARE=1 scripts/inmodule.sh interoptest go test -count=1 -timeout 20m -run '^TestJavaEstate$' . &&
  GRAYLB_KAFKA_ADDR=127.0.0.1:$kp scripts/inmodule.sh interoptest go test -count=1 -timeout 5m -run '^TestJavaKafka$' .) ||
  { scripts/kafka.sh stop; exit 1; }
scripts/kafka.sh stop

echo "== the rollout judge: 20 rollouts per gray build against a real Prometheus"
(GRAYLB_JUDGE_ROLLOUTS=20 scripts/inmodule.sh cmd/graylb go test -count=1 -timeout 30m -run 'TestIntegration_JudgeRealMetrics$' .)

echo "== bad gray builds rolled out with real processes, the full plan (GRAYLB_BADBUILD_PLAN=full)"
# A missed target that is not a known miss fails the test but not this script (badmissed, below).
badmissed=""
(GRAYLB_BADBUILD_PLAN=full scripts/inmodule.sh badbuildtest go test -count=1 -timeout 40m -run '^TestBadBuilds$' .) ||
  badmissed="**This run missed a target that is not a known miss: the test failed (its log names the rows).** "
echo "== bad gray builds in a shadow phase before the canary, the full plan (GRAYLB_BADBUILD_PLAN=full)"
shadowmissed=""
(GRAYLB_BADBUILD_PLAN=full scripts/inmodule.sh badbuildtest go test -count=1 -timeout 40m -run '^TestShadowPhase$' .) ||
  shadowmissed="**This run missed a target: the test failed (its log names the rows).** "
echo "== a shadow copy's writes contained along a chain (examples/shadow, make demo-shadow)"
shadowdemo=ok
scripts/inmodule.sh examples go run ./shadow > "$OUT"/shadow-demo.txt 2>&1 || shadowdemo=failed

echo "== network faults on each link through Toxiproxy, the long plan (GRAYLB_FAULT_PLAN=long)"
# A missed target fails the test but not this script: the rows say which (faultmissed, below).
scripts/toxiproxy.sh start
faultmissed=""
(GRAYLB_FAULT_PLAN=long GRAYLB_TOXIPROXY_ADDR=127.0.0.1:${TOXIPROXY_PORT:-8474} \
  scripts/inmodule.sh faulttest go test -count=1 -parallel 3 -timeout 20m -run '^TestFault_' .) ||
  faultmissed="**This run missed a target: the test failed (its log names the rows).** "
scripts/toxiproxy.sh stop

echo "== a process's life against Nacos (GRAYLB_LIFETIME=long)"
(GRAYLB_LIFETIME=long scripts/inmodule.sh nacos go test -count=1 -timeout 20m -run 'TestIntegration_Lifetime$' .)

# item 1: the chaos test, repeated (FLAKE_RUNS, default 5): how many failed.
runs=${FLAKE_RUNS:-5}; flaky=0
for i in $(seq 1 "$runs"); do
  echo "== chaos run $i of $runs"
  (GRAYLB_RELIABILITY_OUT= scripts/inmodule.sh nacos go test -count=1 -timeout 5m -run 'TestIntegration_ChaosHTTP$' .) || flaky=$((flaky + 1))
done
echo "| 1. \`make test\` flaky: gray requests on prod while Nacos restarts ($flaky of $runs runs failed) | TestIntegration_ChaosHTTP, $runs runs in a row | $runs | 0 in passing runs |" > "$OUT/hostile-01-chaos.md"

# The traffic-management section is measured by its own tests (named in its rows) and kept as it is.
traffic=$(sed -n '/^## Traffic management/,$p' RELIABILITY.md 2>/dev/null || true)

fuzzrows=""
for t in $(go test -list '^Fuzz' ./internal/engine | grep '^Fuzz'); do
  echo "== fuzz $t for $FUZZTIME"
  log=$(go test -run '^$' -fuzz "^$t\$" -fuzztime "$FUZZTIME" ./internal/engine 2>&1) || { echo "$log"; exit 1; }
  execs=$(echo "$log" | grep -o 'execs: [0-9]*' | tail -1 | awk '{print $2}')
  corpus=$( (ls internal/engine/testdata/fuzz/"$t" 2>/dev/null || true) | wc -l)
  fuzzrows+="| $t | $FUZZTIME | ${execs:-?} | $corpus committed seed files (plus the f.Add seeds) | 0 |"$'\n'
done

# badbuilds_how: how the bad-builds table is measured (badbuildtest's TestBadBuilds).
badbuilds_how() {
  echo "${badmissed}Targets: at most 1 % of the requests of each kind failed from 5 s after the gray build registered (a"
  echo "working prod instance is always there: every gray request has its fall-back), 0 prod requests on gray, every"
  echo "bad build rolled back within two checks of gray having enough calls in the step (\`--min-requests\`), every"
  echo "healthy build passed. A target the code of the day misses for a reason the test names (a \"known miss\") is"
  echo "reported in the row and does not fail the test; any other miss does."
  echo
  echo "How: \`TestBadBuilds\` (badbuildtest, a module of its own) builds examples/rollout and the graylb command"
  echo "from this tree and runs, for each run, fresh processes on loopback: two prod instances and the gray build's"
  echo "instance(s) of one service, each registered in Nacos by \`nacos.Register\`, each answering its five"
  echo "endpoints after 15 ms plus an exponential time of mean 15 ms; one caller sending 100 requests a second"
  echo "(open loop: users do not wait for each other), every other one \`gray: true\` (QA traffic), the others"
  echo "unmarked (the canary decides), each with a 1 s deadline within which its body is read whole, through the"
  echo "httpctx Transport with \`graylb.WithOutlierDetection(graylb.OutlierConfig{})\` and round robin, its"
  echo "otelgraylb metrics scraped every second by a real Prometheus. Once the gray build registered and the"
  echo "caller lists it, \`graylb rollout\` runs against the rules in Nacos config at the judge's defaults, its"
  echo "times shortened so that a run takes seconds: \`--steps 10,50 --interval 10s --poll 1s --max-wait 10s\`."
  echo "A run lasts at least 20 s from the gray build's registration; its requests are counted by the second they"
  echo "began in, from 5 s after the registration to the run's end. A crash-looping instance is started again on"
  echo "its port each time it exits, as an orchestrator does. \"Checks\" are the rollout's reads of Prometheus;"
  echo "\"with enough gray calls\" those of the deciding step in which gray had completed \`--min-requests\` calls"
  echo "(the gray requests that fell back to prod count as failed gray calls, as the judge counts them). A build"
  echo "rolled back on its restarts (\`--restart-limit\` 2) is judged from the check that saw its second restart: its"
  echo "evidence is its restarts, not its calls."
  echo "\"The callers' metrics while the rollout ran\" are read from the same Prometheus over the rollout's time: the"
  echo "most gray instances ejected at once (\`graylb_instances_ejected\`), the gray picks that fell back to prod of"
  echo "all gray picks (\`graylb_picks_total\`, outcome \`fell_back\`), which the judge reads too, and how often the"
  echo "number of routable gray instances changed (\`graylb_instances\`)."
  echo "The rows above are the full plan (GRAYLB_BADBUILD_PLAN=full); \`make test\` runs the short plan (one"
  echo "gray instance: 20 % errors, a stalled body, the crash loop, and the healthy build 3 times)."
}

# shadow_how: how the shadow-phase table is measured (badbuildtest's TestShadowPhase).
shadow_how() {
  echo "${shadowmissed}Targets: every bad build stopped in the shadow phase (exit 3, \`shadowPercent\` back to 0, no canary"
  echo "step written), every healthy build let on to the canary (the phase healthy, \`shadowPercent\` back to 0, the"
  echo "first step written), 0 user requests failed in the phase, 0 prod requests on gray."
  echo
  echo "How: \`TestShadowPhase\` (badbuildtest) runs the processes of the table above, fresh for each run, but its caller"
  echo "sends no request marked gray (\`-qa=false\`: 100 unmarked GETs a second over the five endpoints, each answered"
  echo "with about 1 KiB of JSON carrying a request id and a time stamp that differ on every answer), and it installs"
  echo "\`otelgraylb.ShadowObserver\` with \`shadow.WithObserver\` (the httpctx Transport mirrors, its defaults: 16 copies"
  echo "in flight, 64 KiB, 5 s, a noise sample of 0.2). \`graylb rollout --shadow 20% --shadow-for 20s --steps 10"
  echo "--interval 10s --poll 1s --max-wait 15s\` at the judge's defaults (\`--max-shadow-diff\` 0.01): about 20 copies"
  echo "a second. A healthy build's rollout is stopped (SIGTERM) once it wrote its first step. \"User requests failed"
  echo "in the phase\" counts the caller's requests begun from the shadow share's write to the phase's end (the"
  echo "rollout's JSON result). The build \"one answer in 20 with a field of its body changed\" (\`-fault differ5\`) is"
  echo "one only a shadow phase sees: its users get 200, on time. \`make test\` runs the short plan (20 % errors,"
  echo "differ5, the healthy build once); the rows above are the full plan (every bad build once, the healthy build"
  echo "20 times)."
}

# kafka_how: how the messages table is measured (kafkagray's TestKafkaFlows).
kafka_how() {
  echo "Targets: 0 lost, 0 wrong kind (a prod record processed by a gray consumer, or a handler whose context"
  echo "did not route as its record says). How: \`TestKafkaFlows\` (kafkagray) runs each flow against Apache Kafka"
  echo "4.4.0 (KRaft, one broker on loopback, scripts/kafka.sh) on a fresh topic of 4 partitions (the last one"
  echo "gray) while a producer sends a record every 2 ms, every third from a gray request; consumers poll,"
  echo "pick with each record's handler context, commit what they polled, then let a rebalance happen"
  echo "(\`BlockRebalanceOnPoll\`). The SIGKILL flow's gray consumer is a child process killed with SIGKILL (the"
  echo "group's session timeout, 6 s, applies). The cluster flow runs on a topic replicated on 3 brokers"
  echo "(\`scripts/kafka.sh cluster-start 3\`, each broker also a controller) and kills broker 1 with SIGKILL. A"
  echo "record is lost when it was acknowledged to the producer and"
  echo "never processed once the producer stopped and the group drained (60 s). The plain-producer flows"
  echo "produce with a plain franz-go client (its own partitioner, the gray header written by hand, as Spring"
  echo "Kafka does; untrusted-steering: every record gray and on the gray partition of an \`Untrusted()\` topic),"
  echo "a prod and a gray consumer alive throughout; their wrong kind also counts gray records handled by prod"
  echo "once the gray consumer was handling. Measured with the franz-go"
  echo "version kafkagray requires ($(awk '$1 == "github.com/twmb/franz-go" { print $2 }' kafkagray/go.mod))."
}

# interop_how: how the mixed estate is measured (interoptest).
interop_how() {
  echo "Targets: 0 chains that change kind, 0 failed idempotent requests in the flows (the \"drain clock\" rows"
  echo "are the stop before callers were waited for: the 2 s drain wait alone, measured for comparison). How:"
  echo "\`TestJavaEstate\` (interoptest) starts, on loopback against r-nacos, seed 002's Spring Cloud Gateway (a"
  echo "gray-tag header in any case, or a user of its gray-user list), seed 001's Spring Cloud LoadBalancer rule"
  echo "(gray-tag, exactly \`true\`), seed 000's filter chain (gray, any case, the service's own flag) and a plain"
  echo "Spring Cloud Alibaba service (gray-tag: \${gray:false}), a prod and a gray JVM each (Spring Boot 3.5.7,"
  echo "Spring Cloud 2025.0.0, Spring Cloud Alibaba 2025.0.0.0, Spring's default list cache: 35 s), and graylb"
  echo "services keyed as each seed, then sends 25 requests of each kind through every chain. The flows run 2"
  echo "workers per entry, a request every 20 ms each: a graylb instance's SIGTERM (the documented stop:"
  echo "\`Deregister\` with \`nacos.WithLoadBalancer\`, then \`Shutdown\`) behind the gateway and seed 001's caller, a"
  echo "Spring Cloud Alibaba instance's SIGTERM behind graylb's Transport, a gray graylb build promoted to prod"
  echo "behind the gateway (the new prod started, then the old prod and the gray instance SIGTERMed)."
  echo "\`TestJavaKafka\` produces with Spring Kafka (its partitioner, the gray header copied from the request) to"
  echo "a prod and a gray kafkagray consumer of one group, and with kafkagray (requests with \`gray: TRUE\` and"
  echo "without) to a Spring Kafka consumer. The registration rows are the nacos package's"
  echo "\`TestIntegration_KeysConfiguredOnce\` (on main before: 200 of 400) and"
  echo "\`TestIntegration_ConsoleEditDoesNotOutliveARestart\` (on main before: 20 of 20)."
}

{
  echo "# Reliability"
  echo
  echo "Regenerated by \`make test-reliability\` on $(date -u +%Y-%m-%d) ($(go version | awk '{print $3}'), $(nproc) cores,"
  echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')). Nacos: r-nacos on loopback (scripts/nacos.sh)."
  echo "Every figure below comes from a test that fails when its target is missed; \`make test\` runs the same"
  echo "tests for a shorter time."
  echo
  echo "The promises: a prod request never reaches a gray instance; routing keeps working through registry"
  echo "trouble; no input crashes it."
  echo
  echo "## Invariants under churn, chaos and a cluster"
  echo
  echo "| what | setup | load | picks checked | errors | routing violations | leaks / recovery |"
  echo "|---|---|---|---:|---|---|---|"
  cat "$OUT"/churn.md "$OUT"/chaos-http.md "$OUT"/cluster.md 2>/dev/null
  echo
  echo "Targets: 0 violations, 0 leaked goroutines, 0 failed requests while a last good list exists, a"
  echo "registration made after a Nacos restart routed to within 5 s."
  echo
  echo "How: \`TestChurn\` (internal/engine) checks the gray rule on every pick against the snapshot it was served"
  echo "from while about 100 list changes a second add, remove, flip (gray, prod, junk) and re-weight"
  echo "instances; a prod instance that never changes makes every error a failure."
  echo "\`TestIntegration_ChaosHTTP\` and \`TestIntegration_Cluster\` (nacos package) send about 100 requests a"
  echo "second through the HTTP RoundTripper to real loopback servers registered in Nacos, and count failures,"
  echo "prod requests answered by a gray instance, and gray requests answered by prod."
  echo
  echo "What the chaos test found and graylb now does: after a restart, r-nacos is empty and clients register"
  echo "again one by one, so the first lists after the restart can lack every prod or every gray instance."
  echo "Applied, they would fail prod requests or send gray requests to prod. The Nacos Client reports a refill"
  echo "window (10 s after it saw its connection drop or a configured server change state); within it the cache"
  echo "holds a list in which every instance of a kind (prod or gray) vanished, and applies the next list that"
  echo "has them again at once. Outside a refill window a deliberate deregistration applies at the next push."
  echo
  echo "## Scale: many services, churn, names never real"
  echo
  echo "| form | setup and load | live heap after GC | held per service, once learned | picks breaking the gray rule |"
  echo "|---|---|---|---|---:|"
  cat "$OUT"/scale-churn.md 2>/dev/null
  echo
  echo "Targets: the live heap after GC at 2, 5 and 10 minutes within 5 % of each other (and at most 16 B a list"
  echo "change from the first mark to the last), at most 2 000 B held per service plain and 4 000 B with a"
  echo "VersionFilter (TestFootprint's budgets), 0 picks breaking the gray rule. How: \`TestScale_FlatHeapUnderChurn\`"
  echo "(internal/engine) registers the services in a Registry; three LoadBalancers over it (plain, with a"
  echo "VersionFilter, with a VersionFilter and outlier detection) learn every service by its first picks"
  echo "(once gray, once prod), then the churn replaces, every second, an instance of that many services by one"
  echo "at an address never used before (registered first, then the old one deregistered, so every kind always"
  echo "has an instance) while two goroutines pick all the time: a random service, gray or prod, through each"
  echo "LoadBalancer in turn, the third's picks reporting each call's result (an address in seven fails every"
  echo "call and is ejected; a gray request whose gray instance is ejected falls back to prod, as §8 allows), and"
  echo "one pick in a hundred of a name never registered. \`make test\` runs the short form (10 000 services, 200"
  echo "a second, 30 s, marks at 6, 15 and 30 s)."
  echo
  echo "| learning real services while names never real are picked | ratio | bound |"
  echo "|---|---:|---:|"
  cat "$OUT"/scale-unknown.md 2>/dev/null
  echo
  echo "How: \`TestScale_UnknownNamesDoNotSlowLearning\` (internal/engine) times the first picks of 5 000 services"
  echo "quiet and while a goroutine picks distinct names never registered as fast as it can (each starts a"
  echo "lookup under the same lock and slots, and the Cache remembers it a while); the best of two of each."
  echo "Memory for such names: row 7 of the hostile-input table."
  echo
  echo "| form | setup | learning, a service (batches of a quarter, a quarter, a half) | churn | live heap after GC | subscriptions | server RSS | one reconciliation round | picks breaking the gray rule |"
  echo "|---|---|---|---|---|---|---:|---:|---:|"
  cat "$OUT"/scale-nacos.md 2>/dev/null
  echo
  echo "Targets: the time per service of the last batch within 2× of the first's (learning is O(N)), the live"
  echo "heap after GC at three marks within 5 %, one subscription per service (the Supplier's, and the"
  echo "server's own count of listeners, \`naming_subscriber_listener_value_size\` of r-nacos' metrics), 0 picks"
  echo "breaking the gray rule. How: \`TestIntegration_Scale\` (nacos package) registers the services (4"
  echo "instances each, one gray) from 8 SDK clients, one batch per service; one Supplier on its own Client and a"
  echo "LoadBalancer learn them; then two goroutines pick at random while 20 services a second have an instance"
  echo "replaced by one at a new address (a batch registration). \`make test\` runs the short form (2 000"
  echo "services, 10 a second, 20 s). A reconciliation round (every 15 s by default, WithReconcile) reads every"
  echo "subscribed service from the server, one after the other; it is off while the first picks are timed, and"
  echo "two rounds are timed after the churn: the first repairs (and writes to the disk cache) each service the"
  echo "server pushed since its last repair, the second finds every list as the SDK holds it and writes nothing."
  echo
  echo "What the server (r-nacos 0.8.8) sets, from its source and these runs: no limit on subscriptions per"
  echo "connection (its subscriber tables are keyed by service and connection; one connection held every"
  echo "subscription above); pushes go out at most once per service per 500 ms window (changes within it are"
  echo "merged; its delayed-notify actor looks every 500 ms), so a change reaches a subscriber 0.5 to 1 s after"
  echo "it was made, and a new subscriber gets the list pushed once more about that long after it subscribed;"
  echo "its memory is the server RSS column (its own gauge, app_rss_memory). The churn's batch registrations"
  echo "go one at a time from the test's goroutine, which shares the machine's two cores with the pickers: the"
  echo "rate reached says how many got through."
  echo
  echo "## Deployment flows under load"
  echo
  echo "| flow | instances | requests | failed | prod on gray | gray on prod | time to apply |"
  echo "|---|---|---|---|---:|---|---|"
  cat "$OUT"/deploy-*.md 2>/dev/null
  echo
  echo "How: \`deploytest\` (a module of its own) runs each flow against the server with real loopback HTTP"
  echo "and gRPC instances, each process registered through \`nacos.Register\` on its own Client, while a"
  echo "caller sends about 50 requests a second of each kind (HTTP GET through the httpctx Transport, gRPC"
  echo "unary and server-streaming through the grpcctx resolver and balancer), alternating gray and prod."
  echo "A graceful stop is \`Registration.Deregister\` (off the registry, then the 2 s drain wait), then"
  echo "\`http.Server.Shutdown\` and \`grpc.Server.GracefulStop\`. Targets: 0 failed requests, 0 prod requests"
  echo "on gray; the abrupt stop: 0 failed idempotent requests (gRPC methods declared idempotent by a retry policy)."
  echo
  echo "## Network faults on each link"
  echo
  echo "| link | fault | lasted | requests | failed | wrong kind | slowest answered | new instance routed to, after the change | gray user gray, after the change | routing current again, after the fault ended |"
  echo "|---|---|---|---:|---|---:|---|---|---|---|"
  cat "$OUT"/fault-instances.md "$OUT"/fault-nacos.md "$OUT"/fault-nacos-backoff.md "$OUT"/fault-redis.md 2>/dev/null
  echo
  echo "${faultmissed}Targets: 0 requests of the wrong kind, 0 failed requests (every request is an idempotent GET and a"
  echo "working instance of each kind is always there), routing current again within 2 s after the fault ends."
  echo "The instance link's client has a try timeout of 1 s (httpctx.WithTryTimeout): a request sent into a"
  echo "black hole is sent again to the other instance of its kind a second later and answered. After a long"
  echo "outage nacos-sdk-go's reconnect loop (common/remote/rpc, RpcClient.reconnect), sleeping 100 ms longer after"
  echo "each failed attempt up to 5 s, tries again only every 3 to 4 s (60 s unreachable), and no API of the SDK"
  echo "wakes it: the Nacos Supplier and a RuleSource on a Client therefore read their lists and rule document over"
  echo "the server's HTTP API every 250 ms while the connection is down (the RuleSource also for 10 s after), and"
  echo "what changed meanwhile is in force as soon as the server answers. The row \"ended right after an SDK"
  echo "attempt\" (TestFault_NacosAfterBackOff) ends the outage at the worst moment, a whole back-off before the"
  echo "SDK's next attempt; without the HTTP reads it measured 3742 ms (60 s down; 3018 and 3045 ms for the list"
  echo "alone after 40 s), and the plain \"link down\" row 3217 ms."
  echo
  echo "How: \`faulttest\` (a module of its own) puts Toxiproxy (scripts/toxiproxy.sh, built from its Go module)"
  echo "on one link of a client at a time, on loopback: between the httpctx Transport and one prod and one gray"
  echo "instance of two of each kind; between a nacos Client (its Supplier and RuleSource) and the server's HTTP"
  echo "and gRPC ports; between a redisrules RuleSource (the document layout, keyspace notifications on) and"
  echo "redis-server. Throughout, 25 GETs a second each of gray, prod and a user the rules are about to name"
  echo "(3 s deadline each). At each fault's start a new prod instance registers in Nacos and the rules (Nacos"
  echo "config, or the Redis key) get that user as a gray user, straight on the server: the client learns both"
  echo "only over the faulted link. \"Routing current again\" is the time from the fault's end until every change"
  echo "made during it is in force and the faulted instances answer again (0 when that happened during the"
  echo "fault). The rows above are the long plan (GRAYLB_FAULT_PLAN=long: each fault 20 s, the link down 60 s);"
  echo "\`make test\` runs the short plan (4 s, the link down 5 s)."
  echo
  echo "## Messages: records by kind through Kafka"
  echo
  echo "| flow | records | lost | duplicated (why) | wrong kind | time until the switch applied |"
  echo "|---|---:|---:|---|---:|---|"
  cat "$OUT"/kafka.md 2>/dev/null
  echo
  kafka_how
  echo
  echo "## A mixed Java/Go estate"
  echo
  echo "graylb services among Java services written from the seeds' behaviour, one Nacos registry (interoptest)."
  echo
  echo "| fixture | chain | chains | changed kind | failed |"
  echo "|---|---|---:|---:|---:|"
  cat "$OUT"/interop-chains.md 2>/dev/null
  echo
  echo "| case | chains | changed kind | failed |"
  echo "|---|---:|---:|---:|"
  cat "$OUT"/interop-canonical.md 2>/dev/null
  echo
  echo "| flow | through | requests | failed | wrong kind |"
  echo "|---|---|---:|---:|---:|"
  cat "$OUT"/interop-go-sigterm-clock.md "$OUT"/interop-go-sigterm-callers.md "$OUT"/interop-java-stop.md "$OUT"/interop-promotion.md 2>/dev/null
  echo
  echo "| registration | counted | |"
  echo "|---|---|---:|"
  cat "$OUT"/interop-registry-keys.md "$OUT"/interop-registry-console.md 2>/dev/null
  echo
  echo "| records | records | lost | prod on gray | gray on prod (a gray consumer alive) | |"
  echo "|---|---:|---:|---:|---:|---|"
  cat "$OUT"/interop-kafka.md 2>/dev/null
  echo
  interop_how
  echo
  echo "## A process's life against a real Nacos"
  echo
  echo "| phase | client age | lasted | requests | queries | failures | routing | \"unreachable\" warnings | what changed, and how long it took to apply |"
  echo "|---|---|---|---:|---:|---|---|---:|---|"
  cat "$OUT"/lifetime.md 2>/dev/null
  echo
  echo "Targets: 0 failed requests and queries in every phase (while the server is down the last good list"
  echo "answers), 0 prod requests on gray, 0 gray requests on prod while the rules are open, 0 gray requests on"
  echo "gray once \`closed: true\` applied, and no warning that the server is unreachable while it is up (the"
  echo "restart rows count the warnings of a Supplier query answered from the last list while it was down)."
  echo
  echo "How: \`TestIntegration_Lifetime\` (nacos package) follows one process, one Client with a Supplier and a"
  echo "RuleSource on it and a LoadBalancer with the HTTP Transport over them, through what a service lives"
  echo "through: new services first used at several ages (seconds, past the timeout and the connect wait, past"
  echo "every window, after each restart), rules pushed through Nacos config at several ages (a gray user,"
  echo "then \`closed: true\`, then none; each must change routing), the server SIGKILLed once the client is"
  echo "older than every timeout, and SIGTERMed later. Throughout, 25 requests a second per service in use"
  echo "(gray and prod in turn) go through the Transport to real loopback backends registered in Nacos, and"
  echo "the Supplier is queried 10 times a second per service. The rows above are the long plan"
  echo "(GRAYLB_LIFETIME=long: the library's default windows, ages of minutes); \`make test\` runs the short"
  echo "plan (a 1 s timeout, a 3 s reconcile period, ages up to about a minute)."
  echo
  echo "## Hostile input and trust"
  echo
  echo "| item | test | attempts | routed wrongly |"
  echo "|---|---|---|---|"
  cat "$OUT"/hostile-*.md 2>/dev/null
  echo
  echo "## Fuzzing"
  echo
  echo "| target | time | executions | corpus | crashers |"
  echo "|---|---|---:|---|---:|"
  printf "%s" "$fuzzrows"
  echo
  echo "Any crasher the fuzzer finds is written to testdata/fuzz/<target>/ and then runs as a regular test."
  echo
  echo "## The test server's start-up"
  echo
  echo "| what | attempts per start | time per start | failed starts |"
  echo "|---|---|---|---:|"
  cat "$OUT"/nacos-starts.md 2>/dev/null
  echo
  echo "r-nacos 0.8.8 can lose a race while it starts on a clean data folder: it panics"
  echo "(raftapply.rs:421, a request reaching its state-apply actor before its dependencies are wired) and"
  echo "stays up with a raft that takes no writes. \`scripts/nacos.sh start\` reads the server's log on every"
  echo "poll, sees the panic (or raft without a leader) at once, and starts it again on a clean data folder"
  echo "until NACOS_START_DEADLINE (150 s) passes. Measured with \`scripts/nacos.sh measure-starts N\`."
  echo
  echo "## The rollout judge"
  echo
  echo "graylb rollout at its defaults against callers' real otelgraylb metrics scraped by a real"
  echo "Prometheus (TestIntegration_JudgeRealMetrics; the judge: docs/operations.md)."
  echo
  cat "$OUT"/judge.md 2>/dev/null
  echo
  echo "## Bad gray builds, rolled out with real processes"
  echo
  cat "$OUT"/badbuilds.md 2>/dev/null
  echo
  badbuilds_how
  echo
  echo "## Bad gray builds in a shadow phase, before any user reaches them"
  echo
  cat "$OUT"/shadowphase.md 2>/dev/null
  echo
  shadow_how
  echo
  echo "Containment along a chain: \`examples/shadow\` (\`make demo-shadow\`; it exits 1 when a copy's write"
  echo "gets through or a user gets the gray build's answer), client → edge → orders (one prod, one gray build"
  echo "whose totals are wrong) → POST ledger, every prod GET of orders mirrored (\`shadowPercent\` 100). This run: $shadowdemo."
  echo
  echo '```'
  grep -v '^scripts/' "$OUT"/shadow-demo.txt
  echo '```'
  if [ -n "$traffic" ]; then echo; echo "$traffic"; fi
} > RELIABILITY.md
echo "wrote RELIABILITY.md"
