// Command graylb operates gray releases of services that balance with
// graylb: graylb status shows what the rules in force make of each
// instance registered in Nacos; graylb rules validate|get|diff|apply and
// the shortcuts (canary, users, rollback, resume) edit the rule document in
// Nacos config or Redis with compare-and-set; graylb rollout steps the
// canary and rolls back by itself when the callers' metrics in Prometheus
// show gray worse than prod. See docs/operations.md.
package main

import (
	"context"
	"net/http"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, http: http.DefaultClient})
	stop()
	os.Exit(code)
}
