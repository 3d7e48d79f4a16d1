#!/usr/bin/env bash
# scripts/install-test.sh: every module of this repository installs from a tag, as users install it.
#
# The committed HEAD is copied into a temporary git repository, where scripts/release.sh tags it
# with a test version (INSTALL_TEST_VERSION, default v0.1.0-installtest; this repository gets no
# tag). A bare clone of that copy is then served in place of https://github.com/graylb/graylb
# (git's url.<base>.insteadOf, in a git configuration of the test's own), and for each module
# a user module outside the repository runs `go get <module>@<version>` (the go command fetches
# the module and the sibling modules it requires from the tags, as from GitHub), builds and runs
# the program of scripts/testdata/install/<module dir> (main.go; "root" for the root module)
# or runs its packages with `go run <module>/<package>@<version>` (the commands file there).
# It checks that the user's build list has the versions the module is tested with (scripts/inmodule.sh):
# what users install is what make test tests.
#
# Network: none beyond the module proxy. Other modules come from the local module cache first, then
# from GOPROXY; the test's own module cache is temporary, so nothing of the test version stays in
# yours. Uncommitted changes are not part of the test (it says so).
set -euo pipefail
export LC_ALL=C
root=$(cd "$(dirname "$0")/.." && pwd)
version=${INSTALL_TEST_VERSION:-v0.1.0-installtest}
repo_path=github.com/graylb/graylb
START=$SECONDS

head=$(git -C "$root" rev-parse HEAD)
if [ -n "$(git -C "$root" status --porcelain --untracked-files=no)" ]; then
	echo "install-test: testing the committed HEAD ($(git -C "$root" rev-parse --short HEAD)); uncommitted changes are not part of it"
fi

tmp=$(mktemp -d)
cleanup() { chmod -R u+w "$tmp" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
log=$tmp/log
fail() {
	echo "install-test: FAIL: $*" >&2
	[ ! -s "$log" ] || { echo "--- output:" >&2; cat "$log" >&2; }
	exit 1
}

# The copy, tagged by the release script, in a git configuration of the test's own.
cat >"$tmp/gitconfig" <<CONFIG
[user]
	name = install-test
	email = install-test@example.invalid
[url "file://$tmp/graylb.git"]
	insteadOf = https://$repo_path
[protocol "file"]
	allow = always
[advice]
	detachedHead = false
CONFIG
git init -q "$tmp/src"
git -C "$tmp/src" fetch -q --no-tags "$root" "$head"
export GIT_CONFIG_GLOBAL=$tmp/gitconfig GIT_CONFIG_NOSYSTEM=1
git -C "$tmp/src" checkout -q -b release FETCH_HEAD
"$tmp/src/scripts/release.sh" "$version" >"$log" 2>&1 || fail "scripts/release.sh $version"
git clone -q --bare "$tmp/src" "$tmp/graylb.git"

# The user's environment: the graylb modules straight from the (served) repository, as GOPRIVATE
# makes the go command fetch them; every other module from the local module cache or the proxy.
proxy=$(go env GOPROXY)
user_env=(
	GOWORK=off
	GOFLAGS="-modcacherw -trimpath"
	GOMODCACHE="$tmp/modcache"
	GOPROXY="file://$(go env GOMODCACHE)/cache/download${proxy:+,$proxy}"
	GOPRIVATE="$repo_path" GONOPROXY="$repo_path" GONOSUMDB="$repo_path"
)
user_go() { env "${user_env[@]}" go "$@"; }
limit() { if command -v timeout >/dev/null; then timeout "$@"; else shift; "$@"; fi; }

modules=$("$tmp/src/scripts/modules.sh")
while read -r dir path; do
	t0=$SECONDS
	name=$dir
	[ "$name" != . ] || name=root
	prog=$tmp/src/scripts/testdata/install/$name
	[ -f "$prog/main.go" ] || [ -f "$prog/commands" ] || [ -f "$prog/tests" ] ||
		fail "module $path has no program: add scripts/testdata/install/$name/main.go, commands or tests"
	user=$tmp/user/$name
	mkdir -p "$user"
	: >"$log"
	(
		cd "$user"
		user_go mod init example.com/user
		user_go get "$path@$version"
	) >>"$log" 2>&1 || fail "go get $path@$version from a new user module"
	if [ -f "$prog/main.go" ]; then
		cp "$prog/main.go" "$user/main.go"
		(cd "$user" && user_go mod tidy && user_go build -o prog .) >>"$log" 2>&1 ||
			fail "building scripts/testdata/install/$name/main.go against $path@$version"
		(cd "$user" && limit 120 ./prog) </dev/null >>"$log" 2>&1 || fail "running scripts/testdata/install/$name/main.go"
	fi
	ran=()
	if [ -f "$prog/tests" ]; then
		while read -r pkg args; do
			case $pkg in '' | '#'*) continue ;; esac
			p=$path; [ "$pkg" = . ] || p=$path/$pkg
			# shellcheck disable=SC2086 # the arguments are words
			(cd "$user" && limit 300 env "${user_env[@]}" go test -mod=mod -count=1 "$p" $args) </dev/null >>"$log" 2>&1 ||
				fail "go test $p $args (required at $version by a user module)"
			ran+=("go test $pkg${args:+ $args}")
		done <"$prog/tests"
	fi
	if [ -f "$prog/commands" ]; then
		while read -r pkg args; do
			case $pkg in '' | '#'*) continue ;; esac
			p=$path; [ "$pkg" = . ] || p=$path/$pkg
			# shellcheck disable=SC2086 # the arguments are words
			(cd "$tmp" && limit 300 env "${user_env[@]}" go run "$p@$version" $args) </dev/null >>"$log" 2>&1 ||
				fail "go run $p@$version $args"
			ran+=("go run $pkg${args:+ $args}")
		done <"$prog/commands"
	fi

	# What the user runs is what make test tests: each module that provides a package to the user's
	# program is at the version the module's tests select. (A program run with go run <pkg>@<version>
	# is built with its module's own go.mod, the tested one, by construction.)
	checked=0
	if [ -f "$prog/main.go" ]; then
		(cd "$user" && user_go list -deps -f '{{with .Module}}{{if .Version}}{{.Path}} {{.Version}}{{end}}{{end}}' .) |
			sort -u >"$tmp/user.list" || fail "go list -deps in the user module of $path"
		"$tmp/src/scripts/inmodule.sh" "$tmp/src/$dir" go list -m all 2>>"$log" |
			awk 'NF >= 2 { print $1, $2 }' >"$tmp/dev.list" || fail "scripts/inmodule.sh $dir go list -m all"
		# The modules of this repository: at the version tagged.
		echo "$modules" | awk -v v="$version" '{ print $2, v }' >>"$tmp/dev.list"
		sort -u -o "$tmp/dev.list" "$tmp/dev.list"
		differ=$(join -a 1 -e missing -o 0,1.2,2.2 "$tmp/user.list" "$tmp/dev.list" | awk '$2 != $3')
		[ -z "$differ" ] || fail "$path@$version: the user's program builds with other versions than make test tests (module, user's, tested):
$differ"
		checked=$(wc -l <"$tmp/user.list")
	fi
	what=
	[ ! -f "$prog/main.go" ] || what="; built and ran main.go, $checked modules of its build at the tested versions"
	[ ${#ran[@]} -eq 0 ] || what="$what; ran $(IFS=,; echo "${ran[*]}" | sed "s/,/, /g")"
	echo "install-test: $path@$version: go get ok$what ($((SECONDS - t0))s)"
done <<<"$modules"
echo "install-test: every module installs from its tag ($version) in $((SECONDS - START))s"
