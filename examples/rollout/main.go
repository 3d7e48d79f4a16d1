// Command rollout is the two programs of a canary release, run against a
// Nacos server: instances of user-service, each registered as prod or gray
// (a gray build can be broken on purpose with -fault), and a caller that
// sends user-service a steady load through graylb's HTTP Transport, with
// outlier detection at its defaults, and serves graylb's metrics for
// Prometheus, which `graylb rollout` reads to judge the gray build.
//
//	go run ./rollout instance -nacos 127.0.0.1:8848                 # a prod instance
//	go run ./rollout instance -nacos 127.0.0.1:8848                 # and another
//	go run ./rollout instance -nacos 127.0.0.1:8848 -gray -fault hang
//	go run ./rollout caller -nacos 127.0.0.1:8848 -listen 127.0.0.1:9100
//	# Prometheus scraping 127.0.0.1:9100 every second, then:
//	graylb rollout --service user-service --prometheus http://127.0.0.1:9090
//
// The caller's users: every other request is QA traffic (gray: true); the
// others carry no gray header, so the rules' canary decides which of them
// go gray (-qa=false: none is QA traffic). The rules' shadowPercent
// mirrors a share of the unmarked GETs to the gray build; the caller
// counts the shadow copies (otelgraylb's shadow metrics, and /report). Each request has a deadline (1 s) within which its body is
// read whole; a request fails when it gets no 200 or its body does not
// come whole in time. The caller counts what its users saw, by kind of
// request and second of their start, at /report (JSON).
//
// Each instance answers its five endpoints after 15 ms plus an exponential
// time of mean 15 ms, with a JSON body of about 1 KiB (the endpoint's
// items, a request id and a time stamp) and headers that say which kind of
// instance answered (Instance-Kind) and which kind of request it read
// (Request-Kind). A gray instance logs every prod request it receives,
// which graylb never sends it.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "caller" && os.Args[1] != "instance") {
		fmt.Fprint(os.Stderr, `Usage: rollout caller|instance [flags]

  rollout instance   an instance of the service, registered in Nacos as prod or
                     gray (-gray), its build broken as -fault says
  rollout caller     a steady load on the service through graylb's Transport,
                     graylb's metrics at /metrics, what its users saw at /report

rollout caller -h and rollout instance -h list the flags.
`)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "caller":
		err = caller(ctx, os.Args[2:], os.Stdout)
	case "instance":
		err = instance(ctx, os.Args[2:], os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rollout "+os.Args[1]+":", err)
		os.Exit(1)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
