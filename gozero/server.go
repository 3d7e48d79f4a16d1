package gozero

import (
	"net/http"
	"strings"

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
// names). A nil s is left alone.
func AddServerInterceptors(s InterceptorAdder, lb *graylb.LoadBalancer, opts ...grpcctx.Option) {
	if s == nil {
		return
	}
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
// with r.Context() carry them to the next hop. A header that gRPC metadata
// cannot carry (a name outside [0-9a-z-_.], a value with bytes other than
// printable ASCII, which HTTP allows) is not put there, so the zrpc call
// does not fail for it: the zrpc hops route as if it were absent. A
// handler that replaces the context's outgoing metadata
// (metadata.NewOutgoingContext) rather than appending to it drops them.
func Middleware(lb *graylb.LoadBalancer, opts ...httpctx.MiddlewareOption) rest.Middleware {
	mw := httpctx.Middleware(lb, opts...)
	return func(next http.HandlerFunc) http.HandlerFunc {
		return mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if kept := httpctx.Incoming(r.Context()); len(kept) > 0 {
				kv := make([]string, 0, 2*len(kept))
				for k, v := range kept {
					if k = strings.ToLower(k); len(v) > 0 && grpcKey(k) && grpcValue(v[0]) {
						kv = append(kv, k, v[0])
					}
				}
				if len(kv) > 0 {
					r = r.WithContext(metadata.AppendToOutgoingContext(r.Context(), kv...))
				}
			}
			next(w, r)
		})).ServeHTTP
	}
}

// grpcKey reports whether k (lower case) is a metadata key grpc-go sends:
// [0-9a-z-_.], not reserved (grpc-), not binary (-bin: values base64).
func grpcKey(k string) bool {
	if k == "" || strings.HasPrefix(k, "grpc-") || strings.HasSuffix(k, "-bin") {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// grpcValue reports whether v is a metadata value grpc-go sends: printable
// ASCII.
func grpcValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return false
		}
	}
	return true
}
