#!/usr/bin/env bash
# Loads graylb's debug page from the running HTTP example in headless Chromium (Debian's
# package), checks the rendered DOM, and saves the screenshot docs/debug-page.png.
# Installs Chromium when it is missing and the machine allows it; otherwise the test skips
# with a message saying so. make test runs the same test (without the screenshot).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v chromium >/dev/null; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		apt-get update -qq && apt-get install -y -qq chromium || echo "browser-test: could not install chromium; the test will skip"
	else
		echo "browser-test: chromium is missing and cannot be installed here (needs root and apt-get); the test will skip"
	fi
fi
GRAYLB_SCREENSHOT="$PWD/docs/debug-page.png" scripts/inmodule.sh examples go test -count=1 -run TestDebugPageInBrowser -v ./http
