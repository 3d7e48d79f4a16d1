package deploytest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/grpcctx"
	"github.com/graylb/graylb/httpctx"
	"github.com/graylb/graylb/nacos"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
)

// caller is the service that calls the deployed one: a Nacos Client
// shared by its Supplier (and RuleSource), one LoadBalancer reading both
// HTTP headers and gRPC metadata, the httpctx Transport, and a gRPC
// connection through the grpcctx resolver and balancer.
type caller struct {
	svc  string
	lb   *graylb.LoadBalancer
	http *http.Client
	grpc testgrpc.TestServiceClient
}

// newCaller builds the caller of svc; with a rules data id, its rules come
// from that Nacos config document.
func newCaller(t *testing.T, addr, svc, rulesDataID string) *caller {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := nacos.NewClient(ctx, clientOpts(t, addr)...)
	require.NoError(t, err)
	t.Cleanup(func() { cl.Close() })
	sup, err := nacos.NewSupplier(nacos.WithClient(cl))
	require.NoError(t, err)
	t.Cleanup(func() { sup.Close() })
	opts := []graylb.Option{graylb.WithContextHandler(httpctx.Handler(), grpcctx.Handler())}
	if rulesDataID != "" {
		src, err := nacos.NewRuleSource(rulesDataID, nacos.WithClient(cl))
		require.NoError(t, err)
		t.Cleanup(func() { src.Close() })
		opts = append(opts, graylb.WithRuleSource(src))
	}
	lb, err := graylb.New(sup, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { lb.Close() })
	conn, err := grpc.NewClient("graylb:///"+svc+"-grpc", append(grpcctx.DialOptions(lb),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(idempotentServiceConfig))...)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	tr := httpctx.NewTransport(lb)
	t.Cleanup(tr.CloseIdleConnections)
	return &caller{svc: svc, lb: lb, http: &http.Client{Transport: tr}, grpc: testgrpc.NewTestServiceClient(conn)}
}

// idempotentServiceConfig selects the graylb balancer and declares the
// test service's methods idempotent, as a client whose methods are does:
// an RPC already sent to an instance killed under it fails UNAVAILABLE
// (grpc-go cannot know whether the instance acted on it) and is sent
// again, picked again, so it falls back as any new RPC does. RPCs that
// were not sent yet need no policy: the picker routes around a failed
// connection.
const idempotentServiceConfig = `{"loadBalancingConfig":[{"graylb":{}}],"methodConfig":[{"name":[{"service":"grpc.testing.TestService"}],` +
	`"retryPolicy":{"maxAttempts":3,"initialBackoff":"0.01s","maxBackoff":"0.1s","backoffMultiplier":2,"retryableStatusCodes":["UNAVAILABLE"]}}]}`

// requestTimeout bounds each request of the load.
const requestTimeout = 2 * time.Second

// The kinds of request a load sends.
const (
	reqHTTP   = iota // HTTP GET (idempotent)
	reqPOST          // HTTP POST (not idempotent)
	reqUnary         // gRPC unary
	reqStream        // gRPC server stream
	reqKinds
)

var reqNames = [reqKinds]string{"HTTP GET", "HTTP POST", "gRPC unary", "gRPC stream"}

// do sends one request of kind req, gray or prod, and returns the answer
// ("<instance> <kind>").
func (c *caller) do(req int, gray bool) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	switch req {
	case reqHTTP, reqPOST:
		method := http.MethodGet
		if req == reqPOST {
			method = http.MethodPost
		}
		r, err := http.NewRequestWithContext(ctx, method, "http://"+c.svc+"-http/", nil)
		if err != nil {
			return "", err
		}
		r.Header.Set("gray", strconv.FormatBool(gray))
		resp, err := c.http.Do(r)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %d: %s", resp.StatusCode, b)
		}
		return string(b), err
	case reqUnary:
		ctx = metadata.AppendToOutgoingContext(ctx, "gray", strconv.FormatBool(gray))
		r, err := c.grpc.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		return r.GetServerId(), err
	default:
		ctx = metadata.AppendToOutgoingContext(ctx, "gray", strconv.FormatBool(gray))
		st, err := c.grpc.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
		if err != nil {
			return "", err
		}
		r, err := st.Recv()
		if err != nil {
			return "", err
		}
		if _, err := st.Recv(); !errors.Is(err, io.EOF) {
			return "", fmt.Errorf("stream end: %v", err)
		}
		return string(r.GetPayload().GetBody()), nil
	}
}

// waitServed sends requests of in's kind over every protocol until in
// has answered each, or fails the test after within.
func (c *caller) waitServed(t *testing.T, in *instance, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for _, req := range []int{reqHTTP, reqUnary, reqStream} {
		var got string
		var err error
		if !poll(time.Until(deadline), 20*time.Millisecond, func() bool {
			got, err = c.do(req, in.gray.Load())
			return err == nil && strings.HasPrefix(got, in.name+" ")
		}) {
			t.Fatalf("%s not answered by %s within %v (last: %q, %v)", reqNames[req], in.name, within, got, err)
		}
	}
}

// record is one request of a load.
type record struct {
	start  time.Time
	req    int
	gray   bool
	answer string
	err    error
}

func (r record) answeredByGray() bool  { return strings.HasSuffix(r.answer, " gray") }
func (r record) from(name string) bool { return strings.HasPrefix(r.answer, name+" ") }

// load sends a steady stream of requests of each kind it was given, every
// period per kind, alternating gray and prod, and records every one.
type load struct {
	c    *caller
	reqs []int // the kinds of request it sends
	stop chan struct{}
	done sync.WaitGroup
	mu   sync.Mutex
	recs []record
}

// loadPeriod is the time between two requests of one kind: about 50
// requests a second per kind.
const loadPeriod = 20 * time.Millisecond

func startLoad(c *caller, reqs ...int) *load {
	l := &load{c: c, reqs: reqs, stop: make(chan struct{})}
	for _, req := range reqs {
		l.done.Add(1)
		go func() {
			defer l.done.Done()
			tick := time.NewTicker(loadPeriod)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				case <-tick.C:
				}
				r := record{start: time.Now(), req: req, gray: i%2 == 0}
				r.answer, r.err = c.do(req, r.gray)
				l.mu.Lock()
				l.recs = append(l.recs, r)
				l.mu.Unlock()
			}
		}()
	}
	return l
}

// waitFor waits until a record satisfies ok and returns it, or fails the
// test after within.
func (l *load) waitFor(t *testing.T, within time.Duration, what string, ok func(record) bool) record {
	t.Helper()
	seen := 0
	var found record
	if !poll(within, 20*time.Millisecond, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		recs := l.recs[seen:]
		seen += len(recs)
		for _, r := range recs {
			if ok(r) {
				found = r
				return true
			}
		}
		return false
	}) {
		t.Fatalf("%s: not within %v", what, within)
	}
	return found
}

// settleRequests is how many requests of each kind the load sends before
// a change and after it: about a second (loadPeriod).
const settleRequests = 50

// settle lets the load run on until it sent settleRequests more requests
// of each kind it sends.
func (l *load) settle(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	from := len(l.recs)
	l.mu.Unlock()
	if !poll(time.Minute, 20*time.Millisecond, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		var n [reqKinds]int
		for _, r := range l.recs[from:] {
			n[r.req]++
		}
		for _, req := range l.reqs {
			if n[req] < settleRequests {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("the load did not send %d requests of each kind within a minute", settleRequests)
	}
}

// finish stops the load and returns its records.
func (l *load) finish() []record {
	close(l.stop)
	l.done.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.recs
}

// tally counts a load's records.
type tally struct {
	sent, failed, prodOnGray, grayOnProd [reqKinds]int
	firstErr                             [reqKinds]string
}

func count(recs []record) tally {
	var t tally
	for _, r := range recs {
		t.sent[r.req]++
		switch {
		case r.err != nil:
			if t.failed[r.req]++; t.firstErr[r.req] == "" {
				t.firstErr[r.req] = r.err.Error()
			}
		case !r.gray && r.answeredByGray():
			t.prodOnGray[r.req]++
		case r.gray && !r.answeredByGray():
			t.grayOnProd[r.req]++
		}
	}
	return t
}

func sum(a [reqKinds]int) int {
	n := 0
	for _, v := range a {
		n += v
	}
	return n
}

// requests is "N (HTTP GET a, gRPC unary b, ...)" over the kinds sent.
func (t tally) requests() string {
	var parts []string
	for k, n := range t.sent {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", reqNames[k], n))
		}
	}
	return fmt.Sprintf("%d (%s)", sum(t.sent), strings.Join(parts, ", "))
}

// failures lists the first error of each kind that failed.
func (t tally) failures() string {
	var parts []string
	for k, e := range t.firstErr {
		if e != "" {
			parts = append(parts, fmt.Sprintf("%s: %d, first: %s", reqNames[k], t.failed[k], e))
		}
	}
	return strings.Join(parts, "; ")
}

// ms formats a duration in milliseconds, "—" for a negative one (the
// event did not happen).
func ms(d time.Duration) string {
	if d < 0 {
		return "—"
	}
	return fmt.Sprintf("%d ms", d.Round(time.Millisecond).Milliseconds())
}

// since is t - from, -1 when t is zero.
func since(from, t time.Time) time.Duration {
	if t.IsZero() {
		return -1
	}
	return t.Sub(from)
}
