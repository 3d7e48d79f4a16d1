#!/usr/bin/env bash
# Prints the repository's Go modules, one a line: "<dir> <module path>", the directory relative to
# the repository root ("." for the root module). Each module comes after every module of this
# repository that it requires: the order in which a release rewrites and tags them.
# Directories named testdata or starting with a dot are not searched (the go command ignores them).
set -euo pipefail
cd "$(dirname "$0")/.."
files=$(find . \( -name testdata -o -name '.?*' \) -prune -o -name go.mod -type f -print | sort)
[ -n "$files" ] || { echo "modules.sh: no go.mod found" >&2; exit 1; }

# One awk over every go.mod: "M <dir> <path>" for each module, then "P <required sibling>
# <requiring module>" for each requirement between them, and "P <path> <path>" so that a module
# requiring no sibling is ordered too.
# shellcheck disable=SC2086 # the file names have no blanks
listing=$(awk '
	FNR == 1 { d = FILENAME; sub(/\/go\.mod$/, "", d); sub(/^\.\//, "", d); in_block = 0 }
	{ sub(/\/\/.*/, ""); gsub(/"/, "") }
	$1 == "module" { path[d] = $2; dir[$2] = d; next }
	$1 == "require" && $2 == "(" { in_block = 1; next }
	in_block && $1 == ")" { in_block = 0; next }
	in_block && NF { req[d] = req[d] " " $1; next }
	$1 == "require" { req[d] = req[d] " " $2 }
	END {
		for (d in path) {
			if (path[d] == "") { print "modules.sh: " d "/go.mod names no module" > "/dev/stderr"; exit 1 }
			print "M", d, path[d]
			print "P", path[d], path[d]
			n = split(req[d], r, " ")
			for (i = 1; i <= n; i++) if (r[i] in dir) print "P", r[i], path[d]
		}
	}' $files)
order=$(echo "$listing" | awk '$1 == "P" { print $2, $3 }' | sort | tsort) ||
	{ echo "modules.sh: the modules require each other in a cycle" >&2; exit 1; }
for p in $order; do echo "$listing" | awk -v p="$p" '$1 == "M" && $3 == p { print $2, $3 }'; done
