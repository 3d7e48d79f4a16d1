package graylbkratos_test

import (
	"context"
	"strings"
	"testing"

	"github.com/go-kratos/kratos/v2/transport"
	khttp "github.com/go-kratos/kratos/v2/transport/http"
	"github.com/graylb/graylb"
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
