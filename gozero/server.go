package gozero

import (
	"net/http"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/grpcctx"
	"github.com/graylb/graylb/httpctx"
	"github.com/zeromicro/go-zero/rest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
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
// names).
func AddServerInterceptors(s InterceptorAdder, lb *graylb.LoadBalancer, opts ...grpcctx.Option) {
	s.AddUnaryInterceptors(grpcctx.UnaryServerInterceptor(lb, opts...))
	s.AddStreamInterceptors(grpcctx.StreamServerInterceptor(lb, opts...))
}

// Middleware returns a go-zero rest middleware (server.Use) that is
// httpctx.Middleware: the request's routing headers are kept on its
// context for the calls its handler makes (through httpctx.Transport),
// and httpctx.WithTrusted, httpctx.WithUser and httpctx.WithPropagated
// work as there (at a public edge: no routing header of an untrusted
// caller is kept or passed on). The headers kept are also put on the
// context as outgoing gRPC metadata, so the zrpc calls the handler makes
// with r.Context() carry them to the next hop; a handler that replaces
// the context's outgoing metadata (metadata.NewOutgoingContext) rather
// than appending to it drops them.
func Middleware(lb *graylb.LoadBalancer, opts ...httpctx.MiddlewareOption) rest.Middleware {
	mw := httpctx.Middleware(lb, opts...)
	return func(next http.HandlerFunc) http.HandlerFunc {
		return mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if kept := httpctx.Incoming(r.Context()); len(kept) > 0 {
				kv := make([]string, 0, 2*len(kept))
				for k, v := range kept {
					if len(v) > 0 {
						kv = append(kv, k, v[0])
					}
				}
				r = r.WithContext(metadata.AppendToOutgoingContext(r.Context(), kv...))
			}
			next(w, r)
		})).ServeHTTP
	}
}
