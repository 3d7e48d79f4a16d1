package bench

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"

	"github.com/go-kratos/kratos/v2/registry"
	"github.com/go-kratos/kratos/v2/selector"
	"github.com/go-kratos/kratos/v2/selector/filter"
	"github.com/go-kratos/kratos/v2/selector/p2c"
	"github.com/go-kratos/kratos/v2/selector/random"
	"github.com/go-kratos/kratos/v2/selector/wrr"
	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	graylbfilter "github.com/graylb/graylb/filter"
	"github.com/graylb/graylb/policy"
)

// Picker is one peer set up over a list: Pick answers one request; Update
// replaces the list (what a registry push costs it), nil where the peer
// keeps no state per list.
type Picker struct {
	Pick   func(ctx context.Context) (graylb.Instance, error)
	Update func(list []graylb.Instance)
	Close  func()
}

// Peer builds a Picker over a list.
type Peer struct {
	Name  string
	Note  string
	Build func(list []graylb.Instance) (Picker, error)
}

// Graylb is graylb's pick (GrayFilter + VersionFilter) with a policy,
// LoadBalancer.Pick by the service's name.
func Graylb(name string, p policy.Policy) Peer {
	return graylbPeer("graylb "+name, "precomputed routing tree, O(1) pick", p, false)
}

// GraylbService is Graylb through the service's ServicePicker: the pick of
// a caller of one service, as a grpc-go picker serves one target.
func GraylbService(name string, p policy.Policy) Peer {
	return graylbPeer("graylb "+name+", ServicePicker", "as Graylb, without finding the service by name", p, true)
}

func graylbPeer(name, note string, p policy.Policy, perService bool) Peer {
	return Peer{Name: name, Note: note, Build: func(list []graylb.Instance) (Picker, error) {
		lb, err := graylb.New(static(list), graylb.WithFilters(graylbfilter.Version()), graylb.WithPolicy(p))
		if err != nil {
			return Picker{}, err
		}
		pick := func(ctx context.Context) (graylb.Instance, error) { return lb.Pick(ctx, "svc") }
		if perService {
			svc, err := lb.Service("svc")
			if err != nil {
				return Picker{}, err
			}
			pick = svc.Pick
		}
		ab := adapter.For(lb)
		return Picker{
			Pick: pick,
			Update: func(list []graylb.Instance) {
				// What a push costs: building the routing tree over the list.
				if _, err := ab.NewRouter("svc", list); err != nil {
					panic(err)
				}
			},
			Close: func() { lb.Close() },
		}, nil
	}}
}

// grayNodeFilter is the gray rule as a Kratos NodeFilter, run per request.
func grayNodeFilter(ctx context.Context, nodes []selector.Node) []selector.Node {
	reqGray := graylb.IsGray(graylb.ValueFrom(ctx, "gray"))
	var gray, prod []selector.Node
	for _, n := range nodes {
		if graylb.IsGray(n.Metadata()["gray"]) {
			gray = append(gray, n)
		} else {
			prod = append(prod, n)
		}
	}
	switch {
	case !reqGray:
		return prod
	case len(gray) > 0:
		return gray
	default:
		return nodes
	}
}

// Kratos is Kratos v2's selector with one of its balancers, the gray
// NodeFilter and filter.Version.
func Kratos(name string, b selector.Builder) Peer {
	return Peer{Name: "kratos " + name, Note: "NodeFilters run per request", Build: func(list []graylb.Instance) (Picker, error) {
		sel := b.Build()
		byAddr := map[string]graylb.Instance{}
		apply := func(list []graylb.Instance) {
			nodes := make([]selector.Node, len(list))
			for i, in := range list {
				nodes[i] = selector.NewNode("http", in.Addr(), &registry.ServiceInstance{
					ID: in.Addr(), Name: in.Service, Version: in.Metadata["version"], Metadata: in.Metadata,
				})
			}
			sel.Apply(nodes)
		}
		for _, in := range list {
			byAddr[in.Addr()] = in
		}
		apply(list)
		filters := selector.WithNodeFilter(grayNodeFilter, filter.Version("v1"))
		return Picker{
			Pick: func(ctx context.Context) (graylb.Instance, error) {
				n, done, err := sel.Select(ctx, filters)
				if err != nil {
					return graylb.Instance{}, err
				}
				done(ctx, selector.DoneInfo{})
				return byAddr[n.Address()], nil
			},
			Update: apply,
			Close:  func() {},
		}, nil
	}}
}

// KratosPeers are Kratos' wrr, p2c and random.
func KratosPeers() []Peer {
	return []Peer{Kratos("wrr", wrr.NewBuilder()), Kratos("p2c", p2c.NewBuilder()), Kratos("random", random.NewBuilder())}
}

// SeedPort is a faithful port of seed 000's per-request algorithm (copy
// the list, ServerGrayFilter on each instance with the fall-back map, round
// robin), followed by seed 004's per-request version preference. The
// fall-back map is built once per request (the seed rebuilds it for every
// non-matching instance) and the seed's map-shadowing slip is corrected,
// both in the baseline's favour.
func SeedPort() Peer {
	flags := map[string]string{"false": "false", "true": "true"}
	norm := func(v string) string {
		if f, ok := flags[strings.ToLower(v)]; ok {
			return f
		}
		return "false"
	}
	return Peer{Name: "seed-000 port", Note: "per-request filter, as the Java seeds do", Build: func(list []graylb.Instance) (Picker, error) {
		var servers atomic.Pointer[[]graylb.Instance]
		servers.Store(&list)
		var pos atomic.Uint64
		return Picker{
			Pick: func(ctx context.Context) (graylb.Instance, error) {
				all := append([]graylb.Instance(nil), (*servers.Load())...)
				v := graylb.ValueFrom(ctx, "gray")
				if v == "" {
					v = "false"
				}
				req := norm(v)
				var fallback map[string]string
				filtered := make([]graylb.Instance, 0, len(all))
				for _, in := range all {
					ok := norm(in.Metadata["gray"]) == req
					if !ok && req == "true" {
						if fallback == nil {
							fallback = map[string]string{}
							for _, x := range all {
								f := norm(x.Metadata["gray"])
								fallback[f] = f
							}
						}
						_, hasGray := fallback["true"]
						ok = !hasGray
					}
					if ok {
						filtered = append(filtered, in)
					}
				}
				// Seed 004: prefer the request's version, then unversioned, then any.
				want := graylb.ValueFrom(ctx, "version")
				var same, none []graylb.Instance
				for _, in := range filtered {
					switch in.Metadata["version"] {
					case want:
						same = append(same, in)
					case "":
						none = append(none, in)
					}
				}
				switch {
				case len(same) > 0:
					filtered = same
				case len(none) > 0:
					filtered = none
				}
				if len(filtered) == 0 {
					return graylb.Instance{}, errors.New("no instance")
				}
				return filtered[pos.Add(1)%uint64(len(filtered))], nil
			},
			Update: func(l []graylb.Instance) { servers.Store(&l) },
			Close:  func() {},
		}, nil
	}}
}

// static is a Supplier over a fixed list.
type static []graylb.Instance

func (s static) Instances(context.Context, string) ([]graylb.Instance, error) { return s, nil }
func (s static) Watch(string, func([]graylb.Instance)) (func(), error)        { return func() {}, nil }
