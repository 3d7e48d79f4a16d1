#!/usr/bin/env bash
# scripts/release.sh VERSION: prepares the release VERSION (vMAJOR.MINOR.PATCH[-PRERELEASE]) of
# every module of this repository, in this local clone only.
#
#   1. checks that the tree is clean and that no tag of VERSION exists yet;
#   2. in dependency order (scripts/modules.sh: the root first, then grpcctx, nacos, otelgraylb,
#      redisrules, then the modules that require those), makes each module require each of its
#      sibling modules at VERSION: the go command fetches a nested module's siblings at the
#      versions its go.mod names and ignores its replace directives, so these requirements are
#      what a user gets;
#   3. rewrites go.work (scripts/gowork.sh) and commits these changes (when there are any);
#   4. tags that commit once per module: VERSION for the root, <dir>/VERSION for a nested module
#      (grpcctx/v0.2.0, otelgraylb/v0.2.0, ...): annotated tags, in dependency order;
#   5. commits each module's replace directives back (step 2 drops them from the released go.mod
#      files: `go install` of a command at a version refuses a go.mod that has one).
#
# Nothing is pushed. Publishing is the maintainer's step: push the commit and every tag in ONE
# atomic push (the command is printed at the end), so that no module is ever visible at VERSION
# while a sibling it requires is not. Check before publishing with scripts/install-test.sh, which
# runs this script in a copy of the repository with a test version.
set -euo pipefail
die() { echo "release.sh: $*" >&2; exit 1; }
[ $# -eq 1 ] || die "usage: scripts/release.sh VERSION (for example v0.2.0)"
version=$1
# Semantic versioning as the go command reads tags. Major versions 2 and up would need a /vN suffix
# on every module path first.
[[ $version =~ ^v(0|1)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$ ]] ||
	die "VERSION must look like v0.2.0 or v1.0.0-rc.1 (major 0 or 1; v2 and later need /v2 module paths), not '$version'"
cd "$(dirname "$0")/.."

[ -z "$(git status --porcelain)" ] || die "the tree is not clean (commit or stash first):
$(git status --short)"

modules=$(scripts/modules.sh)
tags=()
while read -r dir path; do
	if [ "$dir" = . ]; then tag=$version; else tag=$dir/$version; fi
	! git rev-parse -q --verify "refs/tags/$tag" >/dev/null || die "tag $tag exists already"
	tags+=("$tag")
done <<<"$modules"

devmods=$(mktemp -d)
trap 'rm -rf "$devmods"' EXIT
echo "== requirements between the modules, in dependency order"
changed=()
while read -r dir path; do
	reqs=()
	# The siblings this module requires: every require line naming another module of the repository.
	while read -r _ sibling; do
		[ "$sibling" != "$path" ] || continue
		if go mod edit -json "$dir/go.mod" | grep -q "\"Path\": \"$sibling\""; then
			reqs+=("-require=$sibling@$version")
		fi
	done <<<"$modules"
	if [ ${#reqs[@]} -gt 0 ]; then
		# A released go.mod has no replace directive: `go install <module>/<package>@VERSION` refuses
		# one, and a dependency's would be ignored anyway. The development tree's come back after the
		# tags (step 5).
		cp "$dir/go.mod" "$devmods/$(echo "$dir" | tr / _).mod"
		drops=()
		while read -r _ sibling; do drops+=("-dropreplace=$sibling"); done <<<"$modules"
		go mod edit "${reqs[@]}" "${drops[@]}" "$dir/go.mod"
		echo "$dir: ${reqs[*]#-require=}"
		git diff --quiet -- "$dir/go.mod" || changed+=("$dir/go.mod")
	else
		echo "$dir: no sibling"
	fi
done <<<"$modules"

# The development workspace replaces the versions required, now VERSION, by the directories.
scripts/gowork.sh
git diff --quiet -- go.work || changed+=(go.work)

if [ ${#changed[@]} -gt 0 ]; then
	git commit -q -m "Release $version: every module requires its siblings at $version" -- "${changed[@]}"
	echo "== committed $(git rev-parse --short HEAD): ${changed[*]}"
else
	echo "== every module already requires its siblings at $version: tagging $(git rev-parse --short HEAD)"
fi

for tag in "${tags[@]}"; do git tag -a -m "graylb $tag" "$tag"; done
echo "== tagged (locally): ${tags[*]}"

# Back to development: each module's replace directives (its siblings from this tree) again, over
# the requirements at VERSION.
restored=()
while read -r dir _; do
	saved="$devmods/$(echo "$dir" | tr / _).mod"
	[ -f "$saved" ] || continue
	mapfile -t keeps < <(scripts/replaces.sh "$saved")
	[ ${#keeps[@]} -gt 0 ] || continue
	go mod edit "${keeps[@]}" "$dir/go.mod"
	restored+=("$dir/go.mod")
done <<<"$modules"
if [ ${#restored[@]} -gt 0 ]; then
	git commit -q -m "After $version: the modules take their siblings from this tree again (replace directives)" -- "${restored[@]}"
	echo "== committed $(git rev-parse --short HEAD): the replace directives back for development"
fi
branch=$(git symbolic-ref -q --short HEAD || echo "<branch>")
echo "== to publish, in one atomic push:"
echo "git push --atomic origin $branch ${tags[*]}"
