package docs

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/grpcctx"
	"github.com/graylb/graylb/httpctx"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
)

// httpCaller is a gRPC instance whose handler calls an HTTP service with
// the call's context and answers its name and what the HTTP service said.
type httpCaller struct {
	testgrpc.UnimplementedTestServiceServer
	name   string
	client *http.Client
}

func (s *httpCaller) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	// snippet: two-transports-grpc-in
	// a gRPC handler calling an HTTP service: the call's context is all it takes
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://billing/charge", nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req) // client: &http.Client{Transport: httpctx.NewTransport(lb)}
	// end snippet
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return &testgrpc.SimpleResponse{ServerId: s.name + " → " + string(b)}, nil
}

// docs/two-transports.md: HTTP in, gRPC out, HTTP out again; one
// LoadBalancer per service and no ContextHandler anywhere.
func TestTwoTransports(t *testing.T) {
	reg := graylb.NewRegistry()
	httpService(t, reg, "billing")
	// The gRPC service "orders" calls billing over HTTP.
	billingLB, err := graylb.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	defer billingLB.Close()
	billing := &http.Client{Transport: httpctx.NewTransport(billingLB)}
	for _, kind := range []string{"prod", "gray"} {
		srv := grpc.NewServer(grpcctx.ServerOptions(billingLB)...)
		addr := serveGRPC(t, srv, &httpCaller{name: "orders-" + kind, client: billing})
		host, port := hostPort(t, addr)
		if err := reg.Register(graylb.NewInstance("orders", host, port, map[string]string{"gray": map[string]string{"prod": "false", "gray": "true"}[kind]})); err != nil {
			t.Fatal(err)
		}
	}

	// The HTTP edge: its handler calls orders over gRPC, under a 50 % canary.
	lb, err := graylb.New(reg, graylb.WithRules(graylb.Rules{CanaryPercent: 50}))
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()

	// snippet: two-transports-http-in
	conn, err := grpc.NewClient("graylb:///orders",
		append(grpcctx.DialOptions(lb), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	orders := testgrpc.NewTestServiceClient(conn)

	mux := http.NewServeMux()
	mux.HandleFunc("/checkout", func(w http.ResponseWriter, r *http.Request) {
		// an HTTP handler calling a gRPC service with its request's context
		resp, err := orders.UnaryCall(r.Context(), &testgrpc.SimpleRequest{})
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		io.WriteString(w, resp.GetServerId())
	})
	handler := httpctx.Middleware(lb)(mux) // admits the request's keys once, for every transport
	// end snippet

	edge := httptest.NewServer(handler)
	defer edge.Close()
	counts := map[string]int{}
	for _, c := range []struct {
		header []string
		want   map[string]bool
	}{
		{[]string{"gray", "true"}, map[string]bool{"orders-gray → billing-gray gray=true": true}},
		{[]string{"gray", "false"}, map[string]bool{"orders-prod → billing-prod gray=false": true}},
		// the canary decides at the edge; every hop follows it
		{nil, map[string]bool{"orders-gray → billing-gray gray=true": true, "orders-prod → billing-prod gray=false": true}},
	} {
		for i := 0; i < 40; i++ {
			got := get(t, http.DefaultClient, edge.URL+"/checkout", c.header...)
			if !c.want[got] {
				t.Fatalf("%v: %q, want one of %v", c.header, got, c.want)
			}
			counts[got]++
		}
	}
	if counts["orders-gray → billing-gray gray=true"] <= 40 || counts["orders-prod → billing-prod gray=false"] <= 40 {
		t.Errorf("the canary should draw both kinds: %v", counts)
	}
}
