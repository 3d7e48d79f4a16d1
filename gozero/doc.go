// Package gozero routes go-zero services with graylb: zrpc clients pick
// with graylb's balancer over any graylb Supplier (the in-memory registry,
// Nacos), zrpc servers keep the incoming gray, user and version metadata so
// the calls their handlers make keep the request's kind, and a rest
// middleware does the same for go-zero's HTTP servers, with the trust
// boundary of a public edge.
//
// A zrpc client (ClientOptions, Target):
//
//	c.Target = gozero.Target("user-rpc") // graylb:///user-rpc
//	cli, err := zrpc.NewClient(c, gozero.ClientOptions(lb)...)
//
// A zrpc server (after zrpc.MustNewServer):
//
//	gozero.AddServerInterceptors(s, lb)
//
// A rest server (after rest.MustNewServer):
//
//	server.Use(gozero.Middleware(lb))
//
// # Which balancer picks
//
// zrpc.NewClient gives grpc-go a default service config that selects
// zrpc's own balancer (p2c_ewma, or RpcClientConf.BalancerName where
// go-zero has that field) and then the program's options. grpc-go uses a
// service config that the resolver returns before any default one; the
// graylb resolver returns none, so the default service config decides, and
// of several grpc.WithDefaultServiceConfig options the last one counts.
// ClientOptions carries grpcctx.ServiceConfig in a WithDialOption, which
// zrpc applies after its own: the graylb balancer picks, and zrpc's p2c is
// never built for the connection. A program's own service config (a retry
// policy) goes after ClientOptions and selects graylb
// ("loadBalancingConfig":[{"graylb":{}}] beside its methodConfig, or
// grpcctx.ServiceConfigWithFailureCodes). One after ClientOptions that
// selects another balancer is refused: the client dials no instance and
// every call fails with an error wrapping grpcctx.ErrOtherBalancer that
// says so (see grpcctx.DialOptions).
//
// # Interceptors
//
// zrpc chains its own client interceptors (tracing, duration, Prometheus,
// breaker, timeout; RpcClientConf.Middlewares) before the program's, so
// graylb's client interceptor runs last, right before the call is sent:
// it sees the deadline and metadata the others set, and the kind it writes
// is the one the picker reads. On servers zrpc's interceptors (tracing,
// recover, stat, breaker, load shedding, timeout) run before graylb's,
// which keeps the routing keys (and strips them at a trust boundary)
// just before the handler.
//
// go-zero's client breaker is one per target and method
// (RpcClientConf.Middlewares.Breaker): a gray build that fails can open
// it for the prod requests of the same method too, and a prod build's
// failures for gray ones. graylb's outlier ejection
// (graylb.WithOutlierDetection) works per instance inside each kind; a
// service that runs gray builds may prefer it to the shared breaker.
//
// # From HTTP to zrpc
//
// Middleware keeps the routing headers of an incoming request as httpctx
// does and also puts them on the request context as outgoing gRPC
// metadata, so a zrpc call made with r.Context() carries them: a go-zero
// rest edge and the zrpc services behind it route every hop the same way.
package gozero
