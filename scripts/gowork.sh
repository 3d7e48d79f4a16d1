#!/usr/bin/env bash
# scripts/gowork.sh [-check]: writes go.work, the development workspace (editors, go build and go run
# across the modules), from the go.mod files: it uses every module of the repository, and replaces
# each version at which one module requires another by that module's directory. A workspace reads
# the go.mod of every version its modules require, even of a module it uses itself; these versions
# are the last release or the one being made (scripts/release.sh), which may not exist yet.
# With -check: writes nothing, fails when go.work is not what it would write (make lint).
set -euo pipefail
cd "$(dirname "$0")/.."
modules=$(scripts/modules.sh)
gover=$(echo "$modules" | while read -r d _; do awk '$1 == "go" { print $2; exit }' "$d/go.mod"; done | sort -V | tail -1)
# "<path> <version>" of every requirement between the modules.
reqs=$(echo "$modules" | while read -r d _; do
	go mod edit -json "$d/go.mod" | awk '
		/"Require": \[/ { in_req = 1; next }
		in_req && /^\t\]/ { in_req = 0 }
		in_req && /"Path":/ { gsub(/[",]/, "", $2); path = $2 }
		in_req && /"Version":/ { gsub(/[",]/, "", $2); print path, $2 }'
done | sort -u)
work=$(
	echo "// The development workspace, written by scripts/gowork.sh (make work) from the go.mod files."
	echo "// make test does not use it: it tests each module against its own go.mod (scripts/inmodule.sh)."
	echo "go $gover"
	echo
	echo "use ("
	echo "$modules" | while read -r d _; do if [ "$d" = . ]; then echo "	."; else echo "	./$d"; fi; done | sort
	echo ")"
	replaces=$(echo "$modules" | while read -r d p; do
		echo "$reqs" | awk -v p="$p" -v d="$d" '$1 == p { print "\t" p, $2, "=>", (d == "." ? "./" : "./" d) }'
	done | sort)
	if [ -n "$replaces" ]; then
		echo
		echo "// The versions at which the modules require each other, taken from this tree."
		echo "replace ("
		echo "$replaces"
		echo ")"
	fi
)
if [ "${1:-}" = -check ]; then
	[ "$work" = "$(cat go.work 2>/dev/null)" ] || { echo "go.work is not what scripts/gowork.sh writes (make work):"; diff <(echo "$work") go.work || true; exit 1; }
else
	echo "$work" >go.work
fi
