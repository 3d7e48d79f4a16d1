package gozero

import (
	"net/http"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/grpcctx"
	"github.com/graylb/graylb/httpctx"
	"github.com/zeromicro/go-zero/rest"
	"google.golang.org/grpc"
)

// InterceptorAdder is what AddServerInterceptors needs of a server:
// *zrpc.RpcServer has both methods.
type InterceptorAdder interface {
	AddUnaryInterceptors(...grpc.UnaryServerInterceptor)
	AddStreamInterceptors(...grpc.StreamServerInterceptor)
}

// AddServerInterceptors adds grpcctx's server interceptors to a zrpc
// server (call it before Start): each call keeps the routing keys of its
// incoming metadata (gray, user, version, the keys lb's match rules name)
// on its context, so the zrpc calls its handler makes with that context
// (clients made with ClientOptions) keep the request's kind.
// grpcctx.WithTrusted makes the server a trust boundary, grpcctx.WithUser
// takes the user id from the program. lb names the keys (nil: the default
// names). A nil s is left alone.
func AddServerInterceptors(s InterceptorAdder, lb *graylb.LoadBalancer, opts ...grpcctx.Option) {
	if s == nil {
		return
	}
	s.AddUnaryInterceptors(grpcctx.UnaryServerInterceptor(lb, opts...))
	s.AddStreamInterceptors(grpcctx.StreamServerInterceptor(lb, opts...))
}

// Middleware returns a go-zero rest middleware (server.Use) that is
// httpctx.Middleware: the request is admitted (its routing headers become
// the routing state of its context), and httpctx.WithTrusted,
// httpctx.WithUser and httpctx.WithPropagated work as there (at a public
// edge: no routing header of an untrusted caller is kept or passed on).
// Every call the handler makes with r.Context() keeps the request's kind:
// zrpc calls through clients made with ClientOptions or NewClient, and
// HTTP calls through httpctx.Transport. The request's routing state is
// also written on the context's outgoing gRPC metadata (grpcctx.NextHop),
// so that a zrpc client made without graylb's options (etcd discovery)
// carries it to the next hop; a header that gRPC metadata cannot carry
// (grpcctx.CanCarry) is left out, so the call does not fail for it. A
// handler that replaces the context's outgoing metadata
// (metadata.NewOutgoingContext) rather than appending to it drops it for
// such a client.
func Middleware(lb *graylb.LoadBalancer, opts ...httpctx.MiddlewareOption) rest.Middleware {
	mw := httpctx.Middleware(lb, opts...)
	nextHop := grpcctx.NextHop(lb)
	return func(next http.HandlerFunc) http.HandlerFunc {
		return mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if ctx := nextHop(r.Context()); ctx != r.Context() {
				r = r.WithContext(ctx)
			}
			next(w, r)
		})).ServeHTTP
	}
}
