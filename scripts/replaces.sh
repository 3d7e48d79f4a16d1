#!/usr/bin/env bash
# scripts/replaces.sh GOMOD: prints the replace directives of the go.mod file GOMOD as go mod edit
# flags, one a line ("-replace=<old>=<new>"), so that they can be put back after an edit that
# drops them (scripts/inmodule.sh, scripts/release.sh). Versioned replacements are not used here.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: scripts/replaces.sh GOMOD" >&2; exit 2; }
go mod edit -json "$1" | awk '
	/"Replace": \[/ { in_r = 1 }
	in_r && /"Old": \{/ { side = "old" }
	in_r && /"New": \{/ { side = "new" }
	in_r && /"Path":/ { gsub(/[",]/, "", $2); if (side == "old") from = $2; else print "-replace=" from "=" $2 }'
