package graylbkratos_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/go-kratos/kratos/v2/middleware"
	kmetadata "github.com/go-kratos/kratos/v2/middleware/metadata"
	"github.com/go-kratos/kratos/v2/transport"
	khttp "github.com/go-kratos/kratos/v2/transport/http"
	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	graylbkratos "github.com/graylb/graylb/kratos"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestBoundaryStrips: at an untrusted edge the handler sees none of the
// routing keys the caller sent (in any letter case, repeated, and a key a
// match rule names), in the transport's header, the HTTP request or the
// gRPC incoming metadata; other headers pass.
func TestBoundaryStrips(t *testing.T) {
	for _, scheme := range []string{"http", "grpc"} {
		t.Run(scheme, func(t *testing.T) {
			lb := newLB(t, graylb.NewRegistry(), graylb.Rules{Matches: []graylb.Match{{Key: "x-tenant", Exact: "t1", Gray: true}}})
			seen := make(chan string, 1)
			look := func(ctx context.Context) (string, error) {
				var got []string
				tr, _ := transport.FromServerContext(ctx)
				for _, k := range []string{"gray", "GRAY", "uid", "version", "x-tenant", "x-other"} {
					if v := tr.RequestHeader().Get(k); v != "" {
						got = append(got, "header "+k+"="+v)
					}
				}
				if r, ok := khttp.RequestFromServerContext(ctx); ok {
					for k, v := range r.Header {
						if lk := strings.ToLower(k); lk == "gray" || lk == "uid" || lk == "version" || lk == "x-tenant" {
							got = append(got, "request "+k+"="+strings.Join(v, ","))
						}
					}
				}
				if md, ok := metadata.FromIncomingContext(ctx); ok {
					for _, k := range []string{"gray", "uid", "version", "x-tenant"} {
						if v := md.Get(k); len(v) > 0 {
							got = append(got, "metadata "+k+"="+strings.Join(v, ","))
						}
					}
				}
				seen <- strings.Join(got, "; ")
				return "ok", nil
			}
			s := startServer(t, scheme, look, graylbkratos.Server(lb, graylbkratos.WithTrusted(func(context.Context) bool { return false })))
			hdr := map[string][]string{"gray": {"true", "true"}, "Uid": {"u1"}, "VERSION": {"v9"}, "X-Tenant": {"t1"}, "X-Other": {"kept"}}
			if scheme == "http" {
				c := &chain{scheme: "http", edge: s.endpoint}
				h := map[string]string{}
				for k, v := range hdr {
					h[k] = v[0]
				}
				if _, err := c.call(h); err != nil {
					t.Fatal(err)
				}
			} else {
				conn, err := grpc.Dial(strings.TrimPrefix(s.endpoint, "grpc://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				ctx := context.Background()
				for k, vs := range hdr {
					for _, v := range vs {
						ctx = metadata.AppendToOutgoingContext(ctx, k, v)
					}
				}
				if err := conn.Invoke(ctx, echoMethod, wrapperspb.String(""), new(wrapperspb.StringValue)); err != nil {
					t.Fatal(err)
				}
			}
			if got := <-seen; got != "header x-other=kept" {
				t.Fatalf("the handler saw %q, want only x-other", got)
			}
		})
	}
}

// TestBoundaryStripsKratosMetadata: Kratos' metadata middleware copies the
// request's x-md- headers into the server's metadata and its client side
// writes the x-md-global- ones on every outgoing call. Whatever the order
// of the middleware, a routing key an untrusted caller sent under such a
// name (here a match rule's key) neither decides the kind of the calls
// the handler makes nor reaches the next hop.
func TestBoundaryStripsKratosMetadata(t *testing.T) {
	for _, mdFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("metadata first %v", mdFirst), func(t *testing.T) {
			lb := newLB(t, graylb.NewRegistry(), graylb.Rules{Matches: []graylb.Match{{Key: "x-md-global-tenant", Exact: "t1", Gray: true}}})
			deny := graylbkratos.WithTrusted(func(context.Context) bool { return false })
			server := []middleware.Middleware{kmetadata.Server(), graylbkratos.Server(lb, deny)}
			client := []middleware.Middleware{kmetadata.Client(), graylbkratos.Client(lb)}
			if !mdFirst {
				server[0], server[1] = server[1], server[0]
				client[0], client[1] = client[1], client[0]
			}
			sent := make(chan header, 1)
			s := startServer(t, "http", func(ctx context.Context) (string, error) {
				h := header{}
				call := middleware.Chain(client...)(func(context.Context, interface{}) (interface{}, error) { return nil, nil })
				_, err := call(transport.NewClientContext(ctx, fakeTransport{h}), nil)
				sent <- h
				return "ok", err
			}, server...)
			c := &chain{scheme: "http", edge: s.endpoint}
			if _, err := c.call(map[string]string{"x-md-global-tenant": "t1"}); err != nil {
				t.Fatal(err)
			}
			h := <-sent
			if h["gray"] != "false" || h["x-md-global-tenant"] != "" {
				t.Fatalf("the next hop gets gray=%q x-md-global-tenant=%q, want gray=false and no tenant", h["gray"], h["x-md-global-tenant"])
			}
		})
	}
}

// listBaggage is a Baggage of comma-separated members (OpenTelemetry's
// parser is otelgraylb's; this module does not depend on it).
type listBaggage struct{}

func (listBaggage) Header() string { return "baggage" }

func (listBaggage) Members(v string, names []string) []string {
	out := make([]string, len(names))
	for _, m := range strings.Split(v, ",") {
		k, val, _ := strings.Cut(strings.SplitN(m, ";", 2)[0], "=")
		for i, n := range names {
			if strings.EqualFold(strings.TrimSpace(k), n) {
				out[i] = strings.TrimSpace(val)
			}
		}
	}
	return out
}

func (listBaggage) Without(v string, drop func(string) bool) string {
	var keep []string
	for _, m := range strings.Split(v, ",") {
		k, _, _ := strings.Cut(strings.SplitN(m, ";", 2)[0], "=")
		if m = strings.TrimSpace(m); m != "" && !drop(strings.TrimSpace(k)) {
			keep = append(keep, m)
		}
	}
	return strings.Join(keep, ",")
}

func (listBaggage) With(v string, pairs ...string) string { return v }

func (listBaggage) ContextWithout(ctx context.Context, _ func(string) bool) context.Context {
	return ctx
}

// TestBoundaryStripsBaggage: with a LoadBalancer that reads baggage, at an
// untrusted edge, the members named by routing keys are removed from the
// request's baggage (header, HTTP request and gRPC metadata) before the
// middleware after Server and the handler see it; other members are left
// alone.
func TestBoundaryStripsBaggage(t *testing.T) {
	for _, scheme := range []string{"http", "grpc"} {
		t.Run(scheme, func(t *testing.T) {
			lb := newLB(t, graylb.NewRegistry(), graylb.Rules{Matches: []graylb.Match{{Key: "x-tenant", Exact: "t1", Gray: true}}}, adapter.WithBaggage(listBaggage{}))
			seen := make(chan string, 1)
			look := func(ctx context.Context) (string, error) {
				var got []string
				tr, _ := transport.FromServerContext(ctx)
				got = append(got, "header "+strings.Join(tr.RequestHeader().Values("baggage"), ","))
				if r, ok := khttp.RequestFromServerContext(ctx); ok {
					got = append(got, "request "+strings.Join(r.Header.Values("baggage"), ","))
				}
				if md, ok := metadata.FromIncomingContext(ctx); ok {
					got = append(got, "metadata "+strings.Join(md.Get("baggage"), ","))
				}
				seen <- strings.Join(got, "; ")
				return "ok", nil
			}
			s := startServer(t, scheme, look, graylbkratos.Server(lb, graylbkratos.WithTrusted(func(context.Context) bool { return false })))
			bag := "gray=true,other=1;p=q, UID = mallory ,version=v9;x,x-tenant=t1"
			if scheme == "http" {
				c := &chain{scheme: "http", edge: s.endpoint}
				if _, err := c.call(map[string]string{"baggage": bag}); err != nil {
					t.Fatal(err)
				}
			} else {
				conn, err := grpc.Dial(strings.TrimPrefix(s.endpoint, "grpc://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				ctx := metadata.AppendToOutgoingContext(context.Background(), "baggage", bag)
				if err := conn.Invoke(ctx, echoMethod, wrapperspb.String(""), new(wrapperspb.StringValue)); err != nil {
					t.Fatal(err)
				}
			}
			want := "header other=1;p=q; request other=1;p=q"
			if scheme == "grpc" {
				want = "header other=1;p=q; metadata other=1;p=q"
			}
			if got := <-seen; got != want {
				t.Fatalf("the handler saw %q, want %q", got, want)
			}
		})
	}
}
