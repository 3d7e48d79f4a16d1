#!/usr/bin/env bash
# scripts/alloctests.sh [-list]
#
# Runs every allocation test of every module without the race detector: each Test function that
# calls testing.AllocsPerRun, or runs the conformance suite (adaptertest.Run, whose Allocations
# subtest measures the allocations an adapter adds), in the package and module that hold it
# (scripts/inmodule.sh). The full suite runs the nested modules under -race, where sync.Pool drops
# items at random and these tests skip; this pass is where their counts are checked. With -list it prints
# "<module dir> <package dir> <test>" for each test instead of running them.
#
# The tests are found, not named: a test that measures allocations runs here whatever its name.
# testing.AllocsPerRun may be called only inside a Test function (a subtest or a closure in it
# counts), so that the pass knows which test to run; a call elsewhere fails the pass.
set -euo pipefail
cd "$(dirname "$0")/.."
list=0
case "${1:-}" in
  -list) list=1 ;;
  "") ;;
  *) echo "usage: scripts/alloctests.sh [-list]" >&2; exit 2 ;;
esac

# Test files, as modules.sh finds go.mod files: not under testdata or a directory starting with a dot.
files=$(find . \( -name testdata -o -name '.?*' \) -prune -o -name '*_test.go' -type f -print | sort)
# "<package dir> <test>" for each Test function that calls testing.AllocsPerRun, once; a call
# outside a Test function is an error.
# shellcheck disable=SC2086 # the file names have no blanks
found=$(awk '
	FNR == 1 { fn = "" }
	/^func / {
		fn = $0
		sub(/^func (\([^)]*\) *)?/, "", fn)
		sub(/[\[(].*/, "", fn)
	}
	/^[ \t]*\/\// { next }
	/testing\.AllocsPerRun\(|adaptertest\.Run\(/ {
		if (fn !~ /^Test/) {
			printf "alloctests.sh: %s:%d calls testing.AllocsPerRun outside a Test function (in %s): the pass cannot run it\n", FILENAME, FNR, (fn == "" ? "no function" : fn) > "/dev/stderr"
			bad = 1
			next
		}
		d = FILENAME; sub(/\/[^\/]*$/, "", d); sub(/^\.\/?/, "", d); if (d == "") d = "."
		key = d " " fn
		if (!(key in seen)) { seen[key] = 1; print key }
	}
	END { exit bad }' $files)
[ -n "$found" ] || { echo "alloctests.sh: no test calls testing.AllocsPerRun" >&2; exit 1; }

# Each package's module: the longest module directory that contains it.
mods=$(scripts/modules.sh | cut -d' ' -f1)
moduleof() {
  local d=$1 best="" m
  for m in $mods; do
    [ "$m" != . ] || continue
    case "$d/" in "$m"/*) if [ ${#m} -gt ${#best} ]; then best=$m; fi ;; esac
  done
  echo "${best:-.}"
}
rows=$(while read -r d t; do echo "$(moduleof "$d") $d $t"; done <<<"$found" | sort)
if [ "$list" = 1 ]; then echo "$rows"; exit 0; fi

failed=()
for m in $(echo "$rows" | cut -d' ' -f1 | uniq); do
  pkgs=() names=()
  while read -r mm d t; do
    [ "$mm" = "$m" ] || continue
    if [ "$m" = . ]; then rel=/$d; else rel=${d#"$m"}; fi # "" or /<package dir in the module>
    [ "$rel" != /. ] || rel=""
    pkgs+=(".$rel") names+=("$t")
  done <<<"$rows"
  mapfile -t pkgs < <(printf '%s\n' "${pkgs[@]}" | sort -u)
  mapfile -t names < <(printf '%s\n' "${names[@]}" | sort -u)
  pattern="^($(IFS='|'; echo "${names[*]}"))\$"
  echo "== allocation tests of $m without -race: ${#names[@]} test(s) in ${pkgs[*]}"
  scripts/inmodule.sh "$m" go test -count=1 -timeout 5m -run "$pattern" "${pkgs[@]}" || failed+=("$m")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "alloctests.sh: allocation tests failed in ${failed[*]}" >&2
  exit 1
fi
