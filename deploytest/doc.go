// Package deploytest runs the deployment flows operators run against a
// real Nacos-protocol server, under a steady load over HTTP (the httpctx
// Transport) and gRPC (the grpcctx resolver and balancer, unary and
// streaming): a graceful stop of a gray instance, an abrupt stop of the
// only gray instance, a rolling restart of the prod instances (also
// through a Nacos restart), a promotion of the gray build to prod and a
// rollback through the rules in Nacos config. Each flow reports the
// requests sent, the failed ones, prod requests answered by gray and gray
// requests answered by prod, and how long each change took to apply.
//
// It is a module of its own because it needs the core, grpcctx and nacos
// together. Its tests skip without GRAYLB_NACOS_ADDR (host:port of the
// server's HTTP port) and under -race (the Nacos SDK races inside its RPC
// client); `make test` runs them in its integration pass.
package deploytest
