package gozero

import (
	"errors"
	"fmt"
	"strings"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/grpcctx"
	"github.com/zeromicro/go-zero/zrpc"
)

// ErrNotGraylbTarget is wrapped by NewClient's error when the configuration
// would not resolve through graylb: Endpoints or Etcd set (zrpc prefers
// them to Target), or a Target of another scheme.
var ErrNotGraylbTarget = errors.New("gozero: the client's target is not graylb:///<service>")

// Target returns the zrpc target of service through graylb,
// graylb:///<service>, for RpcClientConf.Target. It replaces what the
// configuration named before: Etcd (go-zero's discov:// and etcd://
// resolvers), Endpoints (direct://) or a k8s:// target.
func Target(service string) string { return grpcctx.Scheme + ":///" + service }

// ClientOptions returns the zrpc client options that route a client by lb:
// the graylb resolver over lb's Supplier, the service config that selects
// graylb's balancer instead of zrpc's p2c, and graylb's client
// interceptors, which pass the routing keys of the request being served on
// and write the kind lb's rules decided. Give them to zrpc.NewClient or
// zrpc.MustNewClient with RpcClientConf.Target set to Target(service).
func ClientOptions(lb *graylb.LoadBalancer) []zrpc.ClientOption {
	dial := grpcctx.DialOptions(lb)
	opts := make([]zrpc.ClientOption, len(dial))
	for i, o := range dial {
		opts[i] = zrpc.WithDialOption(o)
	}
	return opts
}

// NewClient is zrpc.NewClient with ClientOptions(lb) and opts. A
// service config among opts (zrpc.WithDialOption of
// grpc.WithDefaultServiceConfig: a retry policy) comes after graylb's and
// replaces it, as the last one counts: it must select graylb's balancer
// ("loadBalancingConfig":[{"graylb":{}}] beside its methodConfig), or
// every call fails with an error wrapping grpcctx.ErrOtherBalancer. A
// grpc.WithConnectParams among opts replaces graylb's reconnect back-off
// (grpcctx.ReconnectBackoff) the same way. The
// interceptors among opts run outside graylb's, as zrpc's own do: graylb's
// run last, right before the call is sent, and write the routing keys
// whatever metadata the caller's left. NewClient refuses (ErrNotGraylbTarget) a
// configuration that would not resolve through graylb: c.Endpoints or
// c.Etcd.Hosts set, or a c.Target that is not graylb:///<service>.
func NewClient(lb *graylb.LoadBalancer, c zrpc.RpcClientConf, opts ...zrpc.ClientOption) (zrpc.Client, error) {
	if lb == nil {
		return nil, errors.New("gozero: NewClient needs a LoadBalancer")
	}
	switch {
	case len(c.Endpoints) > 0:
		return nil, fmt.Errorf("%w: Endpoints are set (zrpc dials them directly)", ErrNotGraylbTarget)
	case len(c.Etcd.Hosts) > 0:
		return nil, fmt.Errorf("%w: Etcd is set (zrpc resolves through etcd)", ErrNotGraylbTarget)
	case !strings.HasPrefix(c.Target, grpcctx.Scheme+":///"):
		return nil, fmt.Errorf("%w: Target is %q", ErrNotGraylbTarget, c.Target)
	}
	// graylb's service config and reconnect back-off, then the caller's
	// options (a service config or grpc.WithConnectParams of theirs
	// replaces graylb's), then graylb's resolver and interceptors (inside
	// the caller's, which then cannot drop the keys they write).
	graylbs := ClientOptions(lb)
	const replaceable = 2 // grpcctx.DialOptions: the service config, the back-off
	all := make([]zrpc.ClientOption, 0, len(opts)+len(graylbs))
	all = append(append(append(all, graylbs[:replaceable]...), opts...), graylbs[replaceable:]...)
	return zrpc.NewClient(c, all...)
}
