#!/usr/bin/env bash
# scripts/inmodule.sh DIR COMMAND [ARG...]
#
# Runs COMMAND (go test, go vet, staticcheck, go run, go mod tidy, go get ...) in the module at DIR
# with the versions of its dependencies that DIR/go.mod declares (the lowest it supports), and with
# the other modules of this repository taken from this tree.
#
# Why: a published go.mod requires its sibling modules at a released version (scripts/release.sh
# writes it) and has no replace directive, because the go command ignores the replace directives of
# a dependency: users get what the requirements say. While developing, the siblings' code is this
# tree's, not a release's, and that release may not exist yet. So COMMAND runs against a temporary
# copy of DIR/go.mod (GOFLAGS=-modfile, GOWORK=off) that adds "replace <sibling> => <its directory>"
# for every sibling. The versions selected are those DIR/go.mod and its siblings' go.mod files
# declare: what a user installing DIR from a tag gets (scripts/install-test.sh checks that they
# agree). Not the repository's go.work: a workspace selects for each dependency the highest version
# any of its modules requires (for nacos/, which declares nacos-sdk-go v2.3.0, the v2.3.2 of bench/),
# and even a workspace of DIR alone resolves imports differently from DIR's own module mode (nacos/
# does not build in one: an ambiguous import between grpc v1.56.3's two genproto modules).
#
# A command that changes the requirements (go mod tidy, go get) changes the copy: the change is
# written back to DIR/go.mod and DIR/go.sum, without the added replace directives.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: scripts/inmodule.sh DIR COMMAND [ARG...]" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$(cd "$1" && pwd); shift
[ -f "$dir/go.mod" ] || { echo "inmodule.sh: $dir has no go.mod" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
self=$(awk '$1 == "module" { gsub(/"/, "", $2); print $2; exit }' "$dir/go.mod")
edits=() drops=()
while read -r d p; do
	[ "$p" != "$self" ] || continue
	if [ "$d" = . ]; then edits+=("-replace=$p=$root"); else edits+=("-replace=$p=$root/$d"); fi
	drops+=("-dropreplace=$p")
done < <("$root/scripts/modules.sh")
# DIR/go.mod's own replace directives, as go mod edit flags.
mapfile -t keeps < <("$root/scripts/replaces.sh" "$dir/go.mod")
cp "$dir/go.mod" "$tmp/go.mod"
[ ! -f "$dir/go.sum" ] || cp "$dir/go.sum" "$tmp/go.sum"
[ ${#edits[@]} -eq 0 ] || go mod edit "${edits[@]}" "$tmp/go.mod"
cp "$tmp/go.mod" "$tmp/generated.mod"

# Tools built on golang.org/x/tools/go/packages (staticcheck) ask the go command a question in
# GOPATH mode (GO111MODULE=off), where it refuses -modfile: a go first in PATH drops the flag there.
goflags=$(go env GOFLAGS)
realgo=$(command -v go)
mkdir "$tmp/bin"
cat >"$tmp/bin/go" <<SHIM
#!/bin/sh
if [ "\${GO111MODULE:-}" = off ]; then GOFLAGS='$goflags'; export GOFLAGS; fi
exec '$realgo' "\$@"
SHIM
chmod +x "$tmp/bin/go"

(cd "$dir" && PATH="$tmp/bin:$PATH" GOWORK=off GOFLAGS="${goflags:+$goflags }-modfile=$tmp/go.mod" "$@")

if ! cmp -s "$tmp/go.mod" "$tmp/generated.mod"; then
	[ ${#drops[@]} -eq 0 ] || go mod edit "${drops[@]}" "$tmp/go.mod"
	# DIR/go.mod's own replace directives (its siblings by relative directory) go back as they were.
	[ ${#keeps[@]} -eq 0 ] || go mod edit "${keeps[@]}" "$tmp/go.mod"
	cp "$tmp/go.mod" "$dir/go.mod"
fi
if [ -f "$tmp/go.sum" ] && ! cmp -s "$tmp/go.sum" "$dir/go.sum"; then
	cp "$tmp/go.sum" "$dir/go.sum"
fi
