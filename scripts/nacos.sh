#!/usr/bin/env bash
# Installs, starts and stops the Nacos-compatible server the integration tests use:
# r-nacos (crate "rnacos"), on loopback, HTTP 8848 and gRPC 9848.
#
#   scripts/nacos.sh install   build it once (cargo), reused while the binary is there
#   scripts/nacos.sh start     start it (idempotent) and wait until it answers
#   scripts/nacos.sh stop      stop it (idempotent); kill -9 with "stop -9"
#   scripts/nacos.sh pause     SIGSTOP it (it keeps its sockets and answers nothing); "resume" SIGCONTs it
#   scripts/nacos.sh status    exit 0 when it answers
#   scripts/nacos.sh check-ports   exit 3 naming each of its ports something else holds
#   scripts/nacos.sh measure-starts N   N fresh starts beside a CPU load: attempts and time each
#   scripts/nacos.sh cluster-start N   a fresh N-node raft cluster on HTTP ports B, B+10, ...
#                                      (B = NACOS_HTTP_PORT + 10000: 18848 by default; node I's
#                                      gRPC port is its HTTP + 1000, its console B + 3000 + I)
#   scripts/nacos.sh cluster-stop N [-9]   stop it; "cluster-node-stop I" / "cluster-node-start I" one node
#
# NACOS_HTTP_PORT (default 8848) picks the node the start/stop/status commands act on; its
# gRPC port is HTTP + 1000 and its console HTTP + 2000.
# NACOS_HOME (default .nacos/ in the repository) holds its data, log and pid file.
#
# start refuses a port something else holds (its HTTP, gRPC and console ports; raft rides the gRPC
# port): it exits 3 at once, naming each such port and, when ss or lsof can tell, its holder. A
# server this script did not start (no pid file) counts: a test would otherwise stop and restart
# nothing. "check-ports" does that check alone; cluster-start makes it for every node first. start
# starts the server again, on a clean data folder, each time the server loses its start-up race
# (see start), until NACOS_START_DEADLINE (default 150 s) passes; a start whose server found a port
# in use (AddrInUse in its log) is not tried again. Every wait has a deadline and says what it
# waited for.
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

# The start-up race: r-nacos 0.8.8 can panic while it starts on a clean data folder
# (raftapply.rs:421, "called `Option::unwrap()` on a `None` value": its state-apply actor gets a
# request before its dependencies are wired), more often on a loaded machine. The process stays up
# and answers HTTP, but its raft is left with an empty membership and config writes never read back.
# After a kill -9 it can also come back wedged the same way. Either shows in its log: broken() reads
# it on every poll, so a lost race costs the seconds it took to show, and start tries again on a
# clean data folder, as often as its deadline allows.
START_DEADLINE=${NACOS_START_DEADLINE:-150} # seconds for all attempts of one start
ATTEMPTS=0                                  # attempts the last start took (measure-starts reads it)

log_file() { echo "$NACOS_HOME/rnacos-$HTTP_PORT.log"; }

# broken: the log shows a panic, or that raft has no leader (the state a lost race or an unclean
# stop leaves): this process will not become usable. (An empty membership in the log is no sign:
# every start on a clean data folder logs one before raft initialises.)
broken() {
  grep -qE 'panicked at|unknown the raft leader' "$(log_file)" 2>/dev/null
}

# why: one line saying what the log shows, for the retry message.
why() {
  local l
  l=$(grep -m1 -E 'panicked at' -A1 "$(log_file)" 2>/dev/null | tr '\n' ' ' || true)
  [ -n "$l" ] && { echo "it panicked: ${l:0:200}"; return; }
  grep -qE 'unknown the raft leader' "$(log_file)" 2>/dev/null && { echo "its raft state is wedged (no leader)"; return; }
  echo "${1:-it did not come up}"
}

alive() { [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

# holder PORT: what listens on the TCP port, "name (pid N)", when ss or lsof can tell; else nothing.
holder() {
  local out
  if command -v ss >/dev/null; then
    out=$(ss -Hltnp "sport = :$1" 2>/dev/null | sed -n 's/.*users:(("\([^"]*\)",pid=\([0-9]*\).*/\1 (pid \2)/p' | head -n 1 || true)
  fi
  if [ -z "${out:-}" ] && command -v lsof >/dev/null; then
    out=$(lsof -nP -iTCP:"$1" -sTCP:LISTEN -Fpc 2>/dev/null | awk '/^p/ { p = substr($0, 2) } /^c/ { print substr($0, 2) " (pid " p ")"; exit }' || true)
  fi
  echo "${out:-}"
}

# taken: one line "port <port> (<what it is for>): <who holds it>" for each port of this server
# that something accepts connections on. Run while this script's own server is stopped.
taken() {
  local p what h
  for p in "$HTTP_PORT HTTP" "$GRPC_PORT gRPC and raft" "$CONSOLE_PORT console"; do
    what=${p#* }; p=${p%% *}
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      h=$(holder "$p")
      echo "port $p ($what): ${h:+held by }${h:-something accepts connections on it}"
    fi
  done
}

# refuse_taken LINES: the message for the ports taken() listed (start then exits 3).
refuse_taken() {
  echo "nacos on $HTTP_PORT${NACOS_NODE_ID:+ (cluster node $NACOS_NODE_ID)}: a port it needs is taken:" >&2
  echo "$1" | sed 's/^/  /' >&2
  echo "free it, or choose other ports (NACOS_HTTP_PORT moves every port this script uses)" >&2
}

# in_use: the log shows the server could not bind a port (another program took it meanwhile, or
# holds it without accepting connections).
in_use() { grep -qE 'AddrInUse|Address already in use' "$(log_file)" 2>/dev/null; }

# raft_ready: a config write (it goes through r-nacos's raft log) succeeds and reads back.
# r-nacos can answer "true" to a write while reads still 404 (seen after a start-up panic).
raft_ready() {
  local want="ok-$$-$RANDOM" r got
  for _ in $(seq 1 100); do # 100 x (up to 2 s + 0.2 s), and at once when the log shows it broke
    broken && return 1
    alive || return 1
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

start() {
  if [ -f "$PIDFILE" ] && ! alive; then rm -f "$PIDFILE"; fi
  ATTEMPTS=0
  if [ -f "$PIDFILE" ] && answers; then echo "nacos already runs on 127.0.0.1:$HTTP_PORT (pid $(cat "$PIDFILE"))"; return 0; fi
  [ -f "$PIDFILE" ] && stop -9 # ours, alive, not answering
  local began=$SECONDS deadline=$((SECONDS + START_DEADLINE)) reason t
  while :; do
    ATTEMPTS=$((ATTEMPTS + 1))
    t=$(taken)
    [ -z "$t" ] || { refuse_taken "$t"; return 3; }
    # Up: it answers, stays up a moment, its raft takes a write that reads back (the first node
    # of a raft group; a joining node gets its state from the leader), and its log shows no panic.
    if start_once && sleep 1 && alive && answers && { [ -n "${NACOS_JOIN:-}" ] || raft_ready; } && ! broken; then
      [ "$ATTEMPTS" -gt 1 ] && echo "nacos on $HTTP_PORT: up after $ATTEMPTS attempts in $((SECONDS - began)) s"
      return 0
    fi
    reason=$(why)
    stop -9
    rm -rf "$NACOS_HOME/data-$HTTP_PORT"
    if in_use; then
      t=$(taken)
      [ -z "$t" ] || { refuse_taken "$t"; return 3; }
      echo "nacos on $HTTP_PORT: the server found one of its ports in use (HTTP $HTTP_PORT, gRPC and raft $GRPC_PORT, console $CONSOLE_PORT), though none accepts connections now; its log: $(grep -m1 -E 'AddrInUse|Address already in use' "$(log_file)" | cut -c1-300)" >&2
      return 3
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "nacos on $HTTP_PORT: gave up after $ATTEMPTS attempts in $((SECONDS - began)) s (the deadline, NACOS_START_DEADLINE, is $START_DEADLINE s); the last attempt: $reason; its log ends:" >&2
      tail -n 10 "$(log_file)" >&2 || true
      return 1
    fi
    echo "nacos on $HTTP_PORT: attempt $ATTEMPTS failed ($reason); starting again on a clean data folder" >&2
  done
}

start_once() {
  bin=$(install | tail -n 1)
  mkdir -p "$NACOS_HOME/data-$HTTP_PORT"
  : >"$(log_file)" # broken() must read this attempt's log, never the last one's
  RNACOS_RAFT_NODE_ID=${NACOS_NODE_ID:-1} RNACOS_RAFT_JOIN_ADDR=${NACOS_JOIN:-} \
  RNACOS_SDK_HOST=127.0.0.1 RNACOS_HTTP_PORT=$HTTP_PORT RNACOS_GRPC_PORT=$GRPC_PORT \
    RNACOS_HTTP_CONSOLE_PORT=$CONSOLE_PORT RNACOS_CONFIG_DB_DIR="$NACOS_HOME/data-$HTTP_PORT" \
    RNACOS_DATA_DIR="$NACOS_HOME/data-$HTTP_PORT" \
    nohup "$bin" >"$(log_file)" 2>&1 &
  echo $! >"$PIDFILE"
  disown $! 2>/dev/null || true # no "Killed" line from this shell when a failed attempt is stopped
  for _ in $(seq 1 150); do # 30 s, and at once when it exits or its log shows it broke
    broken && return 1
    if answers; then echo "nacos (r-nacos $RNACOS_VERSION) answers on 127.0.0.1:$HTTP_PORT, gRPC $GRPC_PORT"; return 0; fi
    alive || break
    sleep 0.2
  done
  in_use && return 1 # start says which port
  echo "nacos did not answer on HTTP $HTTP_PORT and gRPC $GRPC_PORT within 30 s (or exited); log:" >&2
  tail -n 30 "$(log_file)" >&2 || true
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

# measure_starts N: N fresh starts (kill -9, clean data folder, start) while a bounded CPU load
# (NACOS_MEASURE_LOAD: "go", the default, rebuilds the repository with `go build -a` in a loop;
# "none" adds nothing) runs beside them; prints how many attempts each start took and how long,
# and writes a RELIABILITY.md row to $GRAYLB_RELIABILITY_OUT/nacos-starts.md when that is set.
# Fails when a start failed.
LOADPID="" # the load's process group while measure-starts runs
measure_starts() {
  local n=${1:-30} load=${NACOS_MEASURE_LOAD:-go} i t0 ms failed=0 times=() attempts=()
  case "$load" in
    go) # bounded: the loop ends after 20 minutes whatever happens, and at the end of the measurement
      (cd "$ROOT" && exec setsid bash -c 'end=$((SECONDS + 1200)); while [ $SECONDS -lt $end ]; do go build -a -o /dev/null ./... >/dev/null 2>&1 || sleep 1; done') \
        </dev/null >/dev/null 2>&1 &
      LOADPID=$!
      trap 'if [ -n "$LOADPID" ]; then kill -- -"$LOADPID" 2>/dev/null || kill "$LOADPID" 2>/dev/null; fi; stop -9' EXIT
      sleep 5 ;; # the build is under way
    none) ;;
    *) echo "NACOS_MEASURE_LOAD: want go or none, got $load" >&2; return 2 ;;
  esac
  : >"$NACOS_HOME/measure-$HTTP_PORT.failed"
  for i in $(seq 1 "$n"); do
    stop -9
    rm -rf "$NACOS_HOME/data-$HTTP_PORT"
    t0=$(date +%s%N)
    if start >/dev/null 2>"$NACOS_HOME/measure-$HTTP_PORT.err"; then :; else failed=$((failed + 1)); cat "$NACOS_HOME/measure-$HTTP_PORT.err" >&2; fi
    ms=$((($(date +%s%N) - t0) / 1000000))
    times+=("$ms"); attempts+=("$ATTEMPTS")
    grep 'attempt .* failed' "$NACOS_HOME/measure-$HTTP_PORT.err" >>"$NACOS_HOME/measure-$HTTP_PORT.failed" || true
    echo "start $i of $n: $ATTEMPTS attempt(s), $ms ms (load average $(cut -d' ' -f1 /proc/loadavg))"
  done
  local loadavg
  loadavg=$(cut -d' ' -f1-3 /proc/loadavg)
  if [ -n "$LOADPID" ]; then kill -- -"$LOADPID" 2>/dev/null || kill "$LOADPID" 2>/dev/null || true; LOADPID=""; fi
  stop -9
  local hist median max maxa lost
  hist=$(printf '%s\n' "${attempts[@]}" | sort -n | uniq -c | awk '{printf "%s%d start(s) in %d attempt(s)", (NR > 1 ? ", " : ""), $1, $2}')
  median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR] = $1} END {printf "%.1f", a[int((NR + 1) / 2)] / 1000}')
  max=$(printf '%s\n' "${times[@]}" | sort -n | tail -n 1 | awk '{printf "%.1f", $1 / 1000}')
  maxa=$(printf '%s\n' "${attempts[@]}" | sort -n | tail -n 1)
  lost=$(printf '%s\n' "${attempts[@]}" | awk '{s += $1 - 1} END {print s}')
  local panics
  panics=$(grep -c 'it panicked' "$NACOS_HOME/measure-$HTTP_PORT.failed" || true)
  local what="the load: $( [ "$load" = go ] && echo "\`go build -a ./...\` in a loop beside it" || echo none), load average at the end $loadavg"
  echo "$n starts: $hist; $lost failed attempts ($panics of them panicked); time per start median $median s, max $max s; $failed failed ($what)"
  if [ -n "${GRAYLB_RELIABILITY_OUT:-}" ]; then
    echo "| $n fresh starts (kill -9, clean data folder, start) on $(nproc) cores, $what | $hist ($lost attempts failed, $panics of them with the start-up panic; at most $maxa for one start) | median $median s, max $max s | $failed |" \
      >"$GRAYLB_RELIABILITY_OUT/nacos-starts.md"
  fi
  [ "$failed" = 0 ]
}

CLUSTER_BASE=$((${NACOS_HTTP_PORT:-8848} + 10000))
node() { # node I CMD...: run this script for cluster node I (1-based)
  local i=$1; shift
  NACOS_HTTP_PORT=$((CLUSTER_BASE + (i - 1) * 10)) NACOS_CONSOLE_PORT=$((CLUSTER_BASE + 3000 + i)) \
    NACOS_NODE_ID=$i NACOS_JOIN=$([ "$i" -gt 1 ] && echo "127.0.0.1:$((CLUSTER_BASE + 1000))" || true) \
    "$0" "$@"
}

# cluster_give_up STATUS: stop the nodes cluster-start started and exit with STATUS.
cluster_give_up() {
  for i in $(seq 1 "$n"); do node "$i" stop -9; done
  exit "$1"
}

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) stop "${2:-TERM}" ;;
  # pause: SIGSTOP the server (its sockets stay open and accept, nothing answers); resume: SIGCONT
  pause) alive || { echo "nacos on $HTTP_PORT is not running" >&2; exit 1; }; kill -STOP "$(cat "$PIDFILE")" ;;
  resume) if alive; then kill -CONT "$(cat "$PIDFILE")"; fi ;;
  status) answers ;;
  # check-ports: exit 3 naming each port of this server that something else holds (nothing while
  # this script's own server runs)
  check-ports) if ! alive; then t=$(taken); [ -z "$t" ] || { refuse_taken "$t"; exit 3; }; fi ;;
  measure-starts) measure_starts "${2:-30}" ;;
  cluster-start)
    # Each node's start retries a node that lost the start-up race (see start); the cluster as a
    # whole starts again, on clean data folders, until a write on node 1 reads back on the last
    # node, within one deadline (NACOS_START_DEADLINE) for everything.
    n=${2:-3}; began=$SECONDS; deadline=$((SECONDS + START_DEADLINE)); attempt=0
    while :; do
      attempt=$((attempt + 1))
      for i in $(seq 1 "$n"); do node "$i" stop -9; rm -rf "$NACOS_HOME/data-$((CLUSTER_BASE + (i - 1) * 10))"; done
      # Every node's ports before any node starts: a taken one ends the start at once.
      ok=1
      for i in $(seq 1 "$n"); do node "$i" check-ports || ok=0; done
      [ $ok = 1 ] || { echo "cluster of $n nodes: not started" >&2; exit 3; }
      for i in $(seq 1 "$n"); do
        left=$((deadline - SECONDS)); [ "$left" -gt 0 ] || { ok=0; break; }
        NACOS_START_DEADLINE=$left node "$i" start || { rc=$?; [ $rc != 3 ] || cluster_give_up 3; ok=0; break; }
      done
      # every node alive, and a write on node 1 readable on the last node
      if [ $ok = 1 ]; then for i in $(seq 1 "$n"); do node "$i" status || ok=0; done; fi
      if [ $ok = 1 ]; then
        want="cluster-$$-$RANDOM"
        curl -s -m 2 -X POST "http://127.0.0.1:$CLUSTER_BASE/nacos/v1/cs/configs" \
          -d "dataId=graylb-probe&group=DEFAULT_GROUP&content=$want" >/dev/null 2>&1 || true
        for _ in $(seq 1 50); do # 50 x (up to 2 s + 0.2 s), and at once when a node's log shows it broke
          got=$(curl -s -m 2 "http://127.0.0.1:$((CLUSTER_BASE + (n - 1) * 10))/nacos/v1/cs/configs?dataId=graylb-probe&group=DEFAULT_GROUP" || true)
          [ "$got" = "$want" ] && { echo "cluster of $n nodes up on HTTP ports $CLUSTER_BASE, $((CLUSTER_BASE + 10)), ... (attempt $attempt, $((SECONDS - began)) s)"; exit 0; }
          grep -qE 'panicked at' "$NACOS_HOME"/rnacos-"$CLUSTER_BASE".log "$NACOS_HOME"/rnacos-"$((CLUSTER_BASE + (n - 1) * 10))".log 2>/dev/null && break
          sleep 0.2
        done
      fi
      if [ "$SECONDS" -ge "$deadline" ]; then
        echo "cluster of $n nodes: gave up after $attempt attempts in $((SECONDS - began)) s (the deadline, NACOS_START_DEADLINE, is $START_DEADLINE s)" >&2
        cluster_give_up 1
      fi
      echo "cluster did not form (attempt $attempt: a node did not start, or a write on node 1 did not reach node $n); starting it again" >&2
    done ;;
  cluster-stop) for i in $(seq 1 "${2:-3}"); do node "$i" stop "${3:-TERM}"; done ;;
  cluster-node-stop) node "$2" stop -9 ;;
  cluster-node-start) node "$2" start ;;
  *) echo "usage: $0 install|start|stop [-9]|pause|resume|status|check-ports|measure-starts N|cluster-start N|cluster-stop N|cluster-node-stop I|cluster-node-start I" >&2; exit 2 ;;
esac
