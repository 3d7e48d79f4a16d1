package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/httpctx"
	"github.com/graylb/graylb/nacos"
	"github.com/graylb/graylb/otelgraylb"
	"github.com/graylb/graylb/shadow"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// callerConfig is what the caller's flags set.
type callerConfig struct {
	nacos, service, rules, listen string
	rate                          int           // requests a second
	deadline                      time.Duration // of each request, its body read whole included
	qa                            bool          // every other request gray: true
}

// caller sends the load until ctx ends.
func caller(ctx context.Context, args []string, out io.Writer) error {
	var c callerConfig
	fs := flag.NewFlagSet("rollout caller", flag.ContinueOnError)
	fs.StringVar(&c.nacos, "nacos", envOr("GRAYLB_NACOS_ADDR", "127.0.0.1:8848"), "Nacos server host:port")
	fs.StringVar(&c.service, "service", "user-service", "the service called")
	fs.StringVar(&c.rules, "rules", nacos.DefaultRulesDataID, "data id of the rules document in Nacos config (graylb rollout writes its canary there)")
	fs.StringVar(&c.listen, "listen", "127.0.0.1:9100", "address of /metrics (Prometheus) and /report (what the users saw, JSON)")
	fs.IntVar(&c.rate, "rate", 100, "requests a second, every other one with gray: true unless -qa=false")
	fs.BoolVar(&c.qa, "qa", true, "every other request with gray: true (QA traffic); false: every request unmarked (a shadow phase's load)")
	fs.DurationVar(&c.deadline, "deadline", time.Second, "deadline of each request, its body read whole included")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if c.rate < 1 || c.deadline <= 0 {
		return errors.New("-rate must be at least 1 and -deadline positive")
	}

	// One Nacos connection for the instance lists and the rules.
	client, err := nacos.NewClient(ctx, nacos.WithServers(c.nacos))
	if err != nil {
		return err
	}
	defer client.Close()
	sup, err := nacos.NewSupplier(nacos.WithClient(client))
	if err != nil {
		return err
	}
	defer sup.Close()
	rules, err := nacos.NewRuleSource(c.rules, nacos.WithClient(client))
	if err != nil {
		return err
	}
	defer rules.Close()

	// graylb's metrics through OpenTelemetry's Prometheus exporter: the
	// calls (what graylb rollout judges), the picks and the ejections.
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	defer mp.Shutdown(context.Background())
	meter := mp.Meter(otelgraylb.ScopeName)
	calls, err := otelgraylb.CallObserver(meter)
	if err != nil {
		return err
	}
	picks, err := otelgraylb.Observer(meter)
	if err != nil {
		return err
	}
	// The shadow copies (the rules' shadowPercent): counted by otelgraylb
	// for graylb rollout's shadow phase, and by the tally for /report.
	shadows, err := otelgraylb.ShadowObserver(meter)
	if err != nil {
		return err
	}
	t := newTally()
	ejections := make(chan graylb.Ejection, 64)
	lb, err := graylb.New(sup, graylb.WithRuleSource(rules),
		graylb.WithCallObserver(calls), graylb.WithObserver(picks),
		shadow.WithObserver(func(e shadow.Event) { shadows(e); t.shadowed(e) }),
		// Outlier detection at its defaults; OnEjection only tells.
		graylb.WithOutlierDetection(graylb.OutlierConfig{OnEjection: func(e graylb.Ejection) {
			select {
			case ejections <- e:
			default: // it must not block: a burst beyond the buffer goes untold
			}
		}}))
	if err != nil {
		return err
	}
	defer lb.Close()
	mreg, err := otelgraylb.Register(meter, lb)
	if err != nil {
		return err
	}
	defer mreg.Unregister()

	lis, err := net.Listen("tcp", c.listen)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/report", func(w http.ResponseWriter, r *http.Request) { t.serve(w, r, lb, c.service) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(lis)
	defer srv.Close()
	fmt.Fprintf(out, "calling %s at %d requests a second; /metrics and /report on http://%s\n", c.service, c.rate, lis.Addr())

	done := make(chan struct{})
	go func() {
		defer close(done)
		logEvery(ctx, out, t, lb, c.service, ejections)
	}()
	load(ctx, c, &http.Client{Transport: httpctx.NewTransport(lb)}, t)
	<-done
	return nil
}

// load sends c.rate requests a second until ctx ends, whether or not the
// earlier ones were answered (users do not wait for each other), then
// waits for those in flight. A tick sends every request due by then, so
// ticks a busy machine drops do not lower the rate.
func load(ctx context.Context, c callerConfig, client *http.Client, t *tally) {
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(time.Second / time.Duration(c.rate))
	defer tick.Stop()
	start, sent := time.Now(), 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for due := int(time.Since(start).Seconds() * float64(c.rate)); sent < due; sent++ {
			gray, path := false, endpoints[sent%len(endpoints)]
			if c.qa {
				gray, path = sent%2 == 0, endpoints[(sent/2)%len(endpoints)]
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				call(ctx, c, client, t, gray, path)
			}()
		}
	}
}

// call makes one request and counts what its user saw.
func call(ctx context.Context, c callerConfig, client *http.Client, t *tally, gray bool, path string) {
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, c.deadline)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, "http://"+c.service+path, nil)
	if err != nil {
		panic(err) // the URL is the program's own
	}
	if gray {
		req.Header.Set(graylb.DefaultGrayHeader, "true")
	}
	var o outcome
	resp, err := client.Do(req)
	if err == nil {
		o.instance, o.request = resp.Header.Get(headerInstanceKind), resp.Header.Get(headerRequestKind)
		_, berr := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch {
		case resp.StatusCode != http.StatusOK:
			o.failure = fmt.Sprintf("HTTP %d", resp.StatusCode)
		case berr != nil && rctx.Err() != nil:
			o.failure = "body not whole within the deadline"
		case berr != nil:
			o.failure = "body broken off"
		}
	} else {
		var ce *httpctx.ConnectionError
		switch {
		case rctx.Err() != nil:
			o.failure = "no answer within the deadline"
		case errors.Is(err, graylb.ErrNoInstance):
			o.failure = "no instance"
		case errors.As(err, &ce):
			o.failure = "connection failed"
		default:
			o.failure = "request failed"
		}
	}
	if ctx.Err() != nil {
		return // the caller stops: not a failure its user saw
	}
	t.add(start, gray, o)
}

// outcome is what one request's user saw.
type outcome struct {
	failure           string // "": answered 200 with its whole body in time
	instance, request string // the answer's Instance-Kind and Request-Kind
}

// logEvery prints, every 5 s, what the last 5 s of requests saw, and each
// ejection as it is told.
func logEvery(ctx context.Context, out io.Writer, t *tally, lb *graylb.LoadBalancer, service string, ejections <-chan graylb.Ejection) {
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-ejections:
			t.ejected(e)
			if e.For > 0 {
				fmt.Fprintf(out, "ejected %s instance %s for %s requests (%s) for %s\n", e.Kind, e.Addr, requestsName(e.Requests), e.Reason, e.For)
			} else {
				fmt.Fprintf(out, "readmitted %s instance %s for %s requests\n", e.Kind, e.Addr, requestsName(e.Requests))
			}
		case now := <-tick.C:
			end := now.Truncate(time.Second)
			r := t.report(end.Add(-5*time.Second), end, lb, service)
			fmt.Fprintf(out, "%s: gray: %d sent, %d failed, %d by prod; unmarked: %d sent, %d failed, %d by gray; canary %v%%, closed %t; gray instances %d (%d ejected)\n",
				r.From.Format("15:04:05"), r.Gray.Sent, r.Gray.Failed, r.Gray.ServedByProd, r.Unmarked.Sent, r.Unmarked.Failed, r.Unmarked.ServedByGray,
				r.Rules.CanaryPercent, r.Rules.Closed, r.Instances.Gray+r.Instances.EjectedGray, r.Instances.EjectedGray)
		}
	}
}

func requestsName(r string) string {
	if r == "" {
		return "all"
	}
	return r
}
