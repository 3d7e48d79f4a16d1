#!/usr/bin/env bash
# scripts/use-checkout.sh: an application module uses graylb from this checkout, before a release.
#
#   cd my-service && /path/to/graylb/scripts/use-checkout.sh nacos kafkagray
#
# For each module named (directories of this repository: "." or "root" for the root module,
# nacos, grpcctx, kafkagray, ...) and every module of this repository it requires, the module in the
# current directory (or -C DIR) gets a require at v0.0.0 and a replace by its directory in this
# checkout (go mod edit), then go mod tidy. `go get` cannot do it: no version of graylb is published
# yet, and the go command ignores the replace directives of a dependency's go.mod. Run it again
# after adding a module; drop the replace lines once a release is tagged (go get
# github.com/graylb/graylb/<dir>@vX.Y.Z).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=.
if [ "${1:-}" = "-C" ]; then dir=$2; shift 2; fi
[ $# -gt 0 ] || { echo "usage: use-checkout.sh [-C DIR] MODULE... (root, nacos, grpcctx, kafkagray, ...)" >&2; exit 2; }
cd "$dir"
[ -f go.mod ] || { echo "use-checkout.sh: no go.mod in $(pwd): go mod init first" >&2; exit 2; }
modules=$("$root/scripts/modules.sh") # "<dir> <path>", each after the modules it requires
path_of() { echo "$modules" | awk -v d="$1" '$1 == d { print $2 }'; }
# requires prints the repository's modules that module directory $1 requires, itself included.
requires() {
	local d=$1 p
	p=$(path_of "$d")
	[ -n "$p" ] || { echo "use-checkout.sh: $d is no module of $root" >&2; exit 2; }
	echo "$d"
	GOWORK=off go mod edit -json "$root/$d/go.mod" | awk -F'"' '/"Path":/ { print $4 }' | while read -r req; do
		echo "$modules" | awk -v p="$req" '$2 == p { print $1 }'
	done
}
want=""
for m in "$@"; do
	[ "$m" = root ] && m=.
	m=${m%/}
	want="$want $(requires "$m")"
	# the siblings of the siblings
	for d in $(requires "$m"); do want="$want $(requires "$d")"; done
done
for d in $(echo "$want" | tr ' ' '\n' | sort -u); do
	p=$(path_of "$d")
	target=$root
	[ "$d" = . ] || target=$root/$d
	GOWORK=off go mod edit -require="$p@v0.0.0" -replace="$p=$target"
	echo "use-checkout.sh: $p => $target"
done
GOWORK=off go mod tidy
