// Package graylbkratos gives Kratos v2 services graylb's gray routing by
// configuration: a selector.Builder for Kratos' HTTP and gRPC clients, a
// registry.Discovery over any graylb Supplier (the nacos package's in
// production), a registry.Registrar (over graylb.Registry here; over
// Nacos in the kratos/nacos package), and the server and client
// middleware that keep a request's kind and pass it on.
//
// The lines a Kratos service adds (see docs/kratos.md):
//
//	lb, _ := graylb.New(supplier)
//	selector.SetGlobalSelector(graylbkratos.NewBuilder(lb))
//	discovery := graylbkratos.NewDiscovery(supplier)
//	// servers: http.Middleware(graylbkratos.Server(lb)), grpc.Middleware(graylbkratos.Server(lb))
//	// clients: http.WithMiddleware(graylbkratos.Client(lb)), grpc.WithMiddleware(graylbkratos.Client(lb)),
//	//          WithDiscovery(discovery), WithSubset(0), WithEndpoint("discovery:///user.grpc")
//
// graylb reads and writes the LoadBalancer's own keys (lb.Keys(): the
// header gray by default), not Kratos' metadata keys (x-md-global-...):
// every hop of a chain that mixes Kratos services with httpctx and grpcctx
// services reads the same header, so the chain routes the same way
// whatever each hop is written with, and Kratos' metadata middleware is
// not needed for it (it may run beside, for keys of its own).
package graylbkratos
