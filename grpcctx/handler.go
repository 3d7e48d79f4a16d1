// Package grpcctx adapts graylb to gRPC: a ContextHandler over metadata,
// server interceptors that keep the gray, user and version keys of an
// incoming call (and enforce a trust boundary), client interceptors that
// pass them on and write the kind that rules decided, a resolver for
// graylb:///<service> backed by any graylb Supplier, and a balancer
// registered under Name whose picker runs the graylb chain with each RPC's
// context. Every piece takes the key names from the LoadBalancer.
//
// One line per client (the interceptors and the picker read the metadata
// themselves):
//
//	lb, _ := graylb.New(supplier)
//	conn, _ := grpc.NewClient("graylb:///user-service",
//		append(grpcctx.DialOptions(lb), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
//
// and on servers: grpc.NewServer(grpcctx.ServerOptions(lb)...).
//
// An instance whose connection failed (it stopped abruptly: its connection
// reset, the next one refused) serves nobody while it stays listed: the
// balancer routes as if it were not there, so gray RPCs fall back to prod's
// READY connections instead of failing, and prod RPCs never reach gray.
// grpc-go sends an RPC that had not started on the dead connection through
// the picker again (transparent retry); an RPC already sent on it fails
// with Unavailable, unless the service config's retryPolicy retries
// UNAVAILABLE for its method (for idempotent methods). A connection that
// is being made (the first one, or a new one after a GOAWAY) has not
// failed: its RPCs wait for it, as grpc-go queues while CONNECTING. An RPC
// with nowhere else to go (a prod RPC whose prod connections all failed)
// fails at once with Unavailable and the connection error, or queues when
// it is wait-for-ready, and never goes to the other kind.
package grpcctx

import (
	"context"
	"strings"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"google.golang.org/grpc/metadata"
)

// Handler returns the ContextHandler over gRPC metadata: the outgoing
// metadata of the call first, then the keys a server side admitted for the
// request being served (the server interceptors, or any other adapter's
// server side: the request's routing state is the same whatever transport
// it came over). Raw incoming metadata is never read: what a caller sent
// counts only once a server side (and its trust boundary) let it through.
//
// The client interceptors and the picker read this metadata themselves;
// register Handler (graylb.WithContextHandler) for picks the program makes
// by hand with a call's context (lb.Pick(ctx, ...)). Registered or not,
// the picker asks it once.
func Handler() graylb.ContextHandler { return handler{} }

type handler struct{}

func (handler) Value(ctx context.Context, name string) string {
	if v := metadata.ValueFromOutgoingContext(ctx, name); len(v) > 0 && v[0] != "" {
		return v[0]
	}
	return adapter.KeptFrom(ctx).Get(name)
}

func lower(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return strings.ToLower(s)
		}
	}
	return s
}
