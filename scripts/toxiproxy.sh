#!/usr/bin/env bash
# Installs, starts and stops the fault proxy the fault tests (faulttest/) use: Toxiproxy's server,
# built from its Go module (github.com/Shopify/toxiproxy/v2), on loopback only.
#
#   scripts/toxiproxy.sh install   build it once (go install) into .bin/, reused while it is there
#   scripts/toxiproxy.sh start     start it (idempotent) and wait until its API answers
#   scripts/toxiproxy.sh stop      stop it (idempotent)
#   scripts/toxiproxy.sh status    exit 0 when its API answers
#
# TOXIPROXY_PORT (default 8474) is the port of its API; the proxies the tests make listen on
# loopback ports of their own. TOXIPROXY_HOME (default .toxiproxy/ in the repository) holds its
# log and pid file. start refuses a port on which something answers that this script did not
# start (no pid file). Every wait has a deadline and says what it waited for.
set -euo pipefail
TOXIPROXY_VERSION=${TOXIPROXY_VERSION:-v2.5.0}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$ROOT/.bin/toxiproxy-server
TOXIPROXY_HOME=${TOXIPROXY_HOME:-$ROOT/.toxiproxy}
PORT=${TOXIPROXY_PORT:-8474}
PIDFILE=$TOXIPROXY_HOME/toxiproxy-$PORT.pid
LOG=$TOXIPROXY_HOME/toxiproxy-$PORT.log

answers() { curl -fsS -m 2 -o /dev/null "http://127.0.0.1:$PORT/version" 2>/dev/null; }
alive() { [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

# installed: the binary is there and was built from the module version asked for (its -version
# flag says "git" when built by go install; the build information the go command records does not).
installed() {
  [ -x "$BIN" ] && go version -m "$BIN" 2>/dev/null | awk -v v="$TOXIPROXY_VERSION" '$1 == "mod" && $2 == "github.com/Shopify/toxiproxy/v2" && $3 == v { f = 1 } END { exit !f }'
}

install() {
  if installed; then echo "toxiproxy $TOXIPROXY_VERSION: $BIN" >&2; return 0; fi
  echo "building toxiproxy-server $TOXIPROXY_VERSION with go install" >&2
  local tmp
  tmp=$(mktemp -d)
  # The module's server command is the package cmd/server: go install names the binary "server".
  GOWORK=off GOBIN=$tmp go install "github.com/Shopify/toxiproxy/v2/cmd/server@$TOXIPROXY_VERSION"
  mkdir -p "$(dirname "$BIN")"
  mv "$tmp/server" "$BIN"
  rm -rf "$tmp"
  installed || { echo "toxiproxy.sh: $BIN does not report version $TOXIPROXY_VERSION" >&2; return 1; }
}

start() {
  mkdir -p "$TOXIPROXY_HOME"
  if [ -f "$PIDFILE" ] && ! alive; then rm -f "$PIDFILE"; fi
  if alive && answers; then echo "toxiproxy already runs on 127.0.0.1:$PORT (pid $(cat "$PIDFILE"))"; return 0; fi
  if ! alive && answers; then
    echo "something already answers on 127.0.0.1:$PORT that this script did not start (no pid file $PIDFILE);" >&2
    echo "stop it, or set TOXIPROXY_PORT to a free port" >&2
    return 1
  fi
  alive && stop
  install
  nohup "$BIN" -host 127.0.0.1 -port "$PORT" >"$LOG" 2>&1 &
  echo $! >"$PIDFILE"
  disown $! 2>/dev/null || true
  for _ in $(seq 1 100); do # 20 s
    if answers; then echo "toxiproxy ($TOXIPROXY_VERSION) answers on 127.0.0.1:$PORT"; return 0; fi
    alive || break
    sleep 0.2
  done
  echo "toxiproxy did not answer on 127.0.0.1:$PORT within 20 s (or exited); log:" >&2
  tail -n 20 "$LOG" >&2 || true
  stop
  return 1
}

stop() {
  if alive; then
    local pid
    pid=$(cat "$PIDFILE")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done # 5 s
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$PIDFILE"
}

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) stop ;;
  status) answers ;;
  *) echo "usage: scripts/toxiproxy.sh install|start|stop|status" >&2; exit 2 ;;
esac
