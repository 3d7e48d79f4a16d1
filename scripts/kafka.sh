#!/usr/bin/env bash
# Installs, starts and stops the Apache Kafka broker the kafkagray tests use: Kafka 4.x in
# KRaft mode (broker and controller in one process), from Maven Central, on loopback.
#
#   scripts/kafka.sh install          fetch the jars once (mvn), reused while they are there
#   scripts/kafka.sh start            start one broker (idempotent) and wait until it answers
#   scripts/kafka.sh stop [-9]        stop it (idempotent); kill -9 with "stop -9"
#   scripts/kafka.sh status           exit 0 when it answers
#   scripts/kafka.sh cluster-start N  a fresh N-node cluster (each node broker and controller) on
#                                     ports B, B+10, ... (B = KAFKA_PORT + 1000: 20092 by default)
#   scripts/kafka.sh cluster-stop N [-9]   stop it; "cluster-node-stop I" / "cluster-node-start I" one node
#
# KAFKA_PORT (default 19092) is the broker's listener; its controller listens on KAFKA_PORT + 1.
# KAFKA_HOME (default .kafka/ in the repository) holds the jars (libs/), each node's data, log,
# configuration and pid file.
#
# start refuses a port on which something answers that this script did not start (no pid file).
# Every wait has a deadline (KAFKA_START_DEADLINE, default 60 s) and says what it waited for.
set -euo pipefail
KAFKA_VERSION=${KAFKA_VERSION:-4.4.0}
SLF4J_VERSION=${SLF4J_VERSION:-2.0.17}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
KAFKA_HOME=${KAFKA_HOME:-$ROOT/.kafka}
PORT=${KAFKA_PORT:-19092}
CPORT=$((PORT + 1))
NODE_ID=${KAFKA_NODE_ID:-1}
VOTERS=${KAFKA_VOTERS:-} # cluster: "1@127.0.0.1:p1,2@127.0.0.1:p2,..."; empty: standalone
START_DEADLINE=${KAFKA_START_DEADLINE:-60}
PIDFILE=$KAFKA_HOME/kafka-$PORT.pid
DATA=$KAFKA_HOME/data-$PORT
LOG=$KAFKA_HOME/kafka-$PORT.log
mkdir -p "$KAFKA_HOME"

installed() { [ -f "$KAFKA_HOME/libs/.kafka-$KAFKA_VERSION-slf4j-$SLF4J_VERSION" ]; }

install() {
  if installed; then echo "kafka $KAFKA_VERSION: $KAFKA_HOME/libs" >&2; return 0; fi
  local tmp
  tmp=$(mktemp -d)
  cat >"$tmp/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>graylb</groupId><artifactId>kafka-broker</artifactId><version>0</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-api</artifactId><version>$SLF4J_VERSION</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-simple</artifactId><version>$SLF4J_VERSION</version></dependency>
  </dependencies>
</project>
EOF
  rm -rf "$KAFKA_HOME/libs"
  (cd "$tmp" && mvn -q -B -Dstyle.color=never dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$KAFKA_HOME/libs") >&2
  rm -rf "$tmp"
  touch "$KAFKA_HOME/libs/.kafka-$KAFKA_VERSION-slf4j-$SLF4J_VERSION"
  echo "kafka $KAFKA_VERSION installed in $KAFKA_HOME/libs" >&2
}

# answers: the broker's listener accepts a connection and its log says the broker started.
answers() {
  (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && grep -q 'Kafka Server started\|\[KafkaRaftServer nodeId=[0-9]*\] Kafka Server started' "$LOG" 2>/dev/null
}
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; }
alive() { [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

config() {
  local voters=$VOTERS bootstrap
  [ -z "$voters" ] && voters="$NODE_ID@127.0.0.1:$CPORT"
  bootstrap=$(echo "$voters" | tr ',' '\n' | sed 's/^[0-9]*@//' | paste -sd, -)
  local rf=1
  [ -n "$VOTERS" ] && rf=$(echo "$VOTERS" | tr ',' '\n' | wc -l)
  [ "$rf" -gt 3 ] && rf=3
  cat >"$KAFKA_HOME/server-$PORT.properties" <<EOF
process.roles=broker,controller
node.id=$NODE_ID
controller.quorum.bootstrap.servers=$bootstrap
listeners=PLAINTEXT://127.0.0.1:$PORT,CONTROLLER://127.0.0.1:$CPORT
advertised.listeners=PLAINTEXT://127.0.0.1:$PORT,CONTROLLER://127.0.0.1:$CPORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$DATA
num.partitions=1
offsets.topic.replication.factor=$rf
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=1
default.replication.factor=$rf
min.insync.replicas=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
EOF
}

format() {
  [ -f "$DATA/meta.properties" ] && return 0
  local args=(--standalone)
  if [ -n "$VOTERS" ]; then
    # every node of a cluster gets the same controller directory ids, derived from its node id
    local ic="" v id hp
    for v in $(echo "$VOTERS" | tr ',' ' '); do
      id=${v%%@*}; hp=${v#*@}
      ic="$ic${ic:+,}$id@$hp:$(printf 'graylbnode%06d' "$id" | base64 | tr -d '=' | tr '+/' '-_' | cut -c1-22)"
    done
    args=(--initial-controllers "$ic")
  fi
  java -cp "$KAFKA_HOME/libs/*" kafka.tools.StorageTool format "${args[@]}" \
    -t "${KAFKA_CLUSTER_ID:-graylb-kafka-test0000A}" -c "$KAFKA_HOME/server-$PORT.properties" >>"$LOG" 2>&1
}

start() {
  if [ -f "$PIDFILE" ] && ! alive; then rm -f "$PIDFILE"; fi
  if alive && answers; then echo "kafka already runs on 127.0.0.1:$PORT (pid $(cat "$PIDFILE"))"; return 0; fi
  if [ ! -f "$PIDFILE" ] && listening; then
    echo "something already answers on 127.0.0.1:$PORT that this script did not start (no pid file $PIDFILE);" >&2
    echo "stop it, or set KAFKA_PORT to a free port" >&2
    return 1
  fi
  alive && stop -9
  installed || install
  : >"$LOG"
  config
  format || { echo "kafka on $PORT: formatting $DATA failed; log:" >&2; tail -n 20 "$LOG" >&2; return 1; }
  local began=$SECONDS
  KAFKA_HEAP_OPTS= nohup java -Xms256m -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Dorg.slf4j.simpleLogger.defaultLogLevel=info -cp "$KAFKA_HOME/libs/*" \
    kafka.Kafka "$KAFKA_HOME/server-$PORT.properties" >>"$LOG" 2>&1 &
  echo $! >"$PIDFILE"
  disown $! 2>/dev/null || true
  while [ $((SECONDS - began)) -lt "$START_DEADLINE" ]; do
    if answers; then echo "kafka $KAFKA_VERSION answers on 127.0.0.1:$PORT (controller $CPORT) after $((SECONDS - began)) s"; return 0; fi
    alive || break
    sleep 0.2
  done
  echo "kafka did not answer on 127.0.0.1:$PORT within $START_DEADLINE s (or exited); log:" >&2
  tail -n 30 "$LOG" >&2 || true
  return 1
}

stop() {
  local sig=${1:-TERM} pid
  if [ -f "$PIDFILE" ]; then
    pid=$(cat "$PIDFILE")
    kill "-${sig#-}" "$pid" 2>/dev/null || true
    for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done # 15 s, then -9
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$PIDFILE"
  fi
}

CLUSTER_BASE=$((${KAFKA_PORT:-19092} + 1000))
node() { # node I N CMD...: run this script for node I of an N-node cluster (1-based)
  local i=$1 n=$2 voters="" j; shift 2
  for j in $(seq 1 "$n"); do voters="$voters${voters:+,}$j@127.0.0.1:$((CLUSTER_BASE + (j - 1) * 10 + 1))"; done
  KAFKA_PORT=$((CLUSTER_BASE + (i - 1) * 10)) KAFKA_NODE_ID=$i KAFKA_VOTERS=$voters "$0" "$@"
}

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) stop "${2:-TERM}" ;;
  status) alive && answers ;;
  cluster-start)
    n=${2:-3}
    for i in $(seq 1 "$n"); do node "$i" "$n" stop -9; rm -rf "$KAFKA_HOME/data-$((CLUSTER_BASE + (i - 1) * 10))"; done
    # the nodes wait for each other's controllers: start all, then wait for each
    pids=()
    for i in $(seq 1 "$n"); do node "$i" "$n" start & pids+=($!); done
    ok=1; for p in "${pids[@]}"; do wait "$p" || ok=0; done
    [ $ok = 1 ] && echo "kafka cluster of $n nodes up on ports $CLUSTER_BASE, $((CLUSTER_BASE + 10)), ..." || exit 1 ;;
  cluster-stop) for i in $(seq 1 "${2:-3}"); do node "$i" "${2:-3}" stop "${3:-TERM}"; done ;;
  cluster-node-stop) node "$2" "${3:-3}" stop -9 ;;
  cluster-node-start) node "$2" "${3:-3}" start ;;
  *) echo "usage: $0 install|start|stop [-9]|status|cluster-start N|cluster-stop N [-9]|cluster-node-stop I [N]|cluster-node-start I [N]" >&2; exit 2 ;;
esac
