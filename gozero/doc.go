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
// ClientOptions' service config, which zrpc applies after its own, makes
// graylb's balancer pick (zrpc's p2c is never built); a program's own
// service config goes after it and selects graylb, and one that selects
// another balancer is refused (see grpcctx.DialOptions). graylb's client
// interceptor runs after zrpc's, right before the call is sent; on servers,
// graylb's runs just before the handler. Middleware also puts the headers
// it keeps on the request context as outgoing gRPC metadata, so a zrpc
// call made with r.Context() carries them. docs/go-zero.md says why, and
// what go-zero's shared client breaker means for gray builds.
package gozero
