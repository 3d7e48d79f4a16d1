#!/usr/bin/env bash
# Installs, starts and stops the Nacos-compatible server the integration tests use:
# r-nacos (crate "rnacos"), on loopback, HTTP 8848 and gRPC 9848.
#
#   scripts/nacos.sh install   build it once (cargo), reused while the binary is there
#   scripts/nacos.sh start     start it (idempotent) and wait until it answers
#   scripts/nacos.sh stop      stop it (idempotent); kill -9 with "stop -9"
#   scripts/nacos.sh status    exit 0 when it answers
#   scripts/nacos.sh cluster-start N   a fresh N-node raft cluster on HTTP ports B, B+10, ...
#                                      (B = NACOS_HTTP_PORT + 10000: 18848 by default)
#   scripts/nacos.sh cluster-stop N [-9]   stop it; "cluster-node-stop I" / "cluster-node-start I" one node
#
# NACOS_HTTP_PORT (default 8848) picks the node the start/stop/status commands act on; its
# gRPC port is HTTP + 1000 and its console HTTP + 2000.
# NACOS_HOME (default .nacos/ in the repository) holds its data, log and pid file.
#
# start refuses a port on which something answers that this script did not start (no pid
# file): a test would otherwise stop and restart nothing. Every wait has a deadline and says
# what it waited for.
set -euo pipefail
RNACOS_VERSION=${RNACOS_VERSION:-0.8.8}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
NACOS_HOME=${NACOS_HOME:-$ROOT/.nacos}
HTTP_PORT=${NACOS_HTTP_PORT:-8848}
GRPC_PORT=$((HTTP_PORT + 1000))
CONSOLE_PORT=${NACOS_CONSOLE_PORT:-$((HTTP_PORT + 2000))}
PIDFILE=$NACOS_HOME/rnacos-$HTTP_PORT.pid
mkdir -p "$NACOS_HOME"

find_bin() {
  for b in "${RNACOS_BIN:-}" "$NACOS_HOME/bin/rnacos" "$(command -v rnacos 2>/dev/null || true)" "$HOME/.cargo/bin/rnacos"; do
    if [ -n "$b" ] && [ -x "$b" ] && "$b" --version 2>/dev/null | grep -q "$RNACOS_VERSION"; then echo "$b"; return 0; fi
  done
  return 1
}

answers() {
  curl -fsS -m 2 -o /dev/null "http://127.0.0.1:$HTTP_PORT/nacos/v1/ns/instance/list?serviceName=graylb-probe" 2>/dev/null &&
    (exec 3<>"/dev/tcp/127.0.0.1/$GRPC_PORT") 2>/dev/null
}

install() {
  if bin=$(find_bin); then echo "r-nacos $RNACOS_VERSION: $bin" >&2; echo "$bin"; return 0; fi
  echo "building r-nacos $RNACOS_VERSION with cargo (one time, about 10 minutes on 2 cores)" >&2
  cargo install --locked --quiet --root "$NACOS_HOME" rnacos --version "$RNACOS_VERSION"
  find_bin
}

# raft_ready: a config write (it goes through r-nacos's raft log) succeeds and reads back.
# r-nacos can answer "true" to a write while reads still 404 (seen after a start-up panic).
raft_ready() {
  local want="ok-$$-$RANDOM" r got
  for _ in $(seq 1 100); do # 100 x (up to 2 s + 0.2 s)
    r=$(curl -s -m 2 -X POST "http://127.0.0.1:$HTTP_PORT/nacos/v1/cs/configs" \
      -d "dataId=graylb-probe&group=DEFAULT_GROUP&content=$want" 2>/dev/null || true)
    if [ "$r" = "true" ]; then
      got=$(curl -s -m 2 "http://127.0.0.1:$HTTP_PORT/nacos/v1/cs/configs?dataId=graylb-probe&group=DEFAULT_GROUP" 2>/dev/null || true)
      [ "$got" = "$want" ] && return 0
    fi
    sleep 0.2
  done
  echo "nacos on $HTTP_PORT: a config write did not read back within about 20 s (last answer: ${r:-none})" >&2
  return 1
}

# wedged: the log shows the raft state r-nacos cannot leave after an unclean stop
# (an empty membership, config writes answered 500): only a clean data folder recovers it.
wedged() {
  grep -qE 'members: \{\}|unknown the raft leader' "$NACOS_HOME/rnacos-$HTTP_PORT.log" 2>/dev/null
}

start() {
  # r-nacos 0.8.8 can panic while it starts (raftapply.rs:421, a request reaching raft before it
  # is wired up), or come back wedged after a kill -9: check that it stays up and its raft takes
  # writes that read back, and retry, on a clean data folder after a failed attempt.
  if [ -f "$PIDFILE" ] && ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then rm -f "$PIDFILE"; fi
  if [ -f "$PIDFILE" ] && answers; then echo "nacos already runs on 127.0.0.1:$HTTP_PORT (pid $(cat "$PIDFILE"))"; return 0; fi
  if [ ! -f "$PIDFILE" ] && answers; then
    echo "something already answers on 127.0.0.1:$HTTP_PORT that this script did not start (no pid file $PIDFILE);" >&2
    echo "stop it, or set NACOS_HTTP_PORT to a free port" >&2
    return 1
  fi
  [ -f "$PIDFILE" ] && stop -9 # ours, alive, not answering
  for attempt in 1 2 3; do
    if start_once && sleep 1 && [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null && answers; then
      if [ -n "${NACOS_JOIN:-}" ] || raft_ready; then return 0; fi
    fi
    echo "nacos on $HTTP_PORT did not come up cleanly (attempt $attempt of 3); restarting it on a clean data folder" >&2
    wedged && echo "nacos on $HTTP_PORT: its raft state is wedged (empty membership)" >&2
    tail -n 5 "$NACOS_HOME/rnacos-$HTTP_PORT.log" >&2 || true
    stop -9
    rm -rf "$NACOS_HOME/data-$HTTP_PORT"
  done
  echo "nacos on $HTTP_PORT: gave up after 3 attempts" >&2
  return 1
}

start_once() {
  if answers; then echo "nacos: port $HTTP_PORT answers although the server was stopped" >&2; return 1; fi
  bin=$(install | tail -n 1)
  mkdir -p "$NACOS_HOME/data-$HTTP_PORT"
  RNACOS_RAFT_NODE_ID=${NACOS_NODE_ID:-1} RNACOS_RAFT_JOIN_ADDR=${NACOS_JOIN:-} \
  RNACOS_SDK_HOST=127.0.0.1 RNACOS_HTTP_PORT=$HTTP_PORT RNACOS_GRPC_PORT=$GRPC_PORT \
    RNACOS_HTTP_CONSOLE_PORT=$CONSOLE_PORT RNACOS_CONFIG_DB_DIR="$NACOS_HOME/data-$HTTP_PORT" \
    RNACOS_DATA_DIR="$NACOS_HOME/data-$HTTP_PORT" \
    nohup "$bin" >"$NACOS_HOME/rnacos-$HTTP_PORT.log" 2>&1 &
  echo $! >"$PIDFILE"
  for _ in $(seq 1 150); do
    if answers; then echo "nacos (r-nacos $RNACOS_VERSION) answers on 127.0.0.1:$HTTP_PORT, gRPC $GRPC_PORT"; return 0; fi
    kill -0 "$(cat "$PIDFILE")" 2>/dev/null || break
    sleep 0.2
  done
  echo "nacos did not answer on HTTP $HTTP_PORT and gRPC $GRPC_PORT within 30 s (or exited); log:" >&2
  tail -n 30 "$NACOS_HOME/rnacos-$HTTP_PORT.log" >&2 || true
  return 1
}

stop() {
  sig=${1:-TERM}
  if [ -f "$PIDFILE" ]; then
    pid=$(cat "$PIDFILE")
    kill "-${sig#-}" "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done # 5 s, then -9
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$PIDFILE"
  fi
}

CLUSTER_BASE=$((${NACOS_HTTP_PORT:-8848} + 10000))
node() { # node I CMD...: run this script for cluster node I (1-based)
  local i=$1; shift
  NACOS_HTTP_PORT=$((CLUSTER_BASE + (i - 1) * 10)) NACOS_CONSOLE_PORT=$((CLUSTER_BASE + 3000 + i)) \
    NACOS_NODE_ID=$i NACOS_JOIN=$([ "$i" -gt 1 ] && echo "127.0.0.1:$((CLUSTER_BASE + 1000))" || true) \
    "$0" "$@"
}

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) stop "${2:-TERM}" ;;
  status) answers ;;
  cluster-start)
    n=${2:-3}
    for attempt in 1 2 3; do
      for i in $(seq 1 "$n"); do node "$i" stop -9; rm -rf "$NACOS_HOME/data-$((CLUSTER_BASE + (i - 1) * 10))"; done
      ok=1
      for i in $(seq 1 "$n"); do node "$i" start || { ok=0; break; }; done
      # every node alive, and a write on node 1 readable on the last node
      for i in $(seq 1 "$n"); do node "$i" status || ok=0; done
      if [ $ok = 1 ]; then
        want="cluster-$$-$RANDOM"
        curl -s -m 2 -X POST "http://127.0.0.1:$CLUSTER_BASE/nacos/v1/cs/configs" \
          -d "dataId=graylb-probe&group=DEFAULT_GROUP&content=$want" >/dev/null 2>&1 || true
        for _ in $(seq 1 50); do # 50 x (up to 2 s + 0.2 s)
          got=$(curl -s -m 2 "http://127.0.0.1:$((CLUSTER_BASE + (n - 1) * 10))/nacos/v1/cs/configs?dataId=graylb-probe&group=DEFAULT_GROUP" || true)
          [ "$got" = "$want" ] && { echo "cluster of $n nodes up on HTTP ports $CLUSTER_BASE, $((CLUSTER_BASE + 10)), ..."; exit 0; }
          sleep 0.2
        done
      fi
      echo "cluster did not form (attempt $attempt of 3: a write on node 1 did not reach node $n); starting it again" >&2
    done
    echo "cluster of $n nodes: gave up after 3 attempts" >&2
    exit 1 ;;
  cluster-stop) for i in $(seq 1 "${2:-3}"); do node "$i" stop "${3:-TERM}"; done ;;
  cluster-node-stop) node "$2" stop -9 ;;
  cluster-node-start) node "$2" start ;;
  *) echo "usage: $0 install|start|stop [-9]|status|cluster-start N|cluster-stop N|cluster-node-stop I|cluster-node-start I" >&2; exit 2 ;;
esac
