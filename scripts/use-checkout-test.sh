#!/usr/bin/env bash
# scripts/use-checkout-test.sh: a new application module uses graylb from this checkout with one
# command (scripts/use-checkout.sh), and builds and runs: the README's recipe, as a user runs it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
GOWORK=off go mod init example.com/myservice >/dev/null 2>&1
cat >main.go <<'GO'
package main

import (
	"fmt"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/kafkagray"
	"github.com/graylb/graylb/nacos"
)

func main() {
	lb, err := graylb.New(graylb.NewRegistry(), graylb.WithGrayKey("gray-tag"), graylb.WithSelfGray(nacos.GrayFromEnv()))
	if err != nil {
		panic(err)
	}
	defer lb.Close()
	link, err := kafkagray.New(lb)
	if err != nil {
		panic(err)
	}
	fmt.Println("metadata key:", lb.Keys().GrayMetadata, "consumers gray:", link.Gray())
}
GO
"$root/scripts/use-checkout.sh" nacos kafkagray >/dev/null
out=$(GOWORK=off go run .)
[ "$out" = "metadata key: gray-tag consumers gray: false" ] || { echo "use-checkout-test: FAIL: the program said: $out" >&2; exit 1; }
echo "use-checkout-test: ok (a new module on nacos and kafkagray from this checkout: $(grep -c '^replace' go.mod) replace lines written)"
