package docs

import (
	"context"
	"log"
	"reflect"
	"strings"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/debugpage"
	"github.com/graylb/graylb/filter"
	"github.com/graylb/graylb/policy"
)

// docs/core.md: the LoadBalancer, its options, a pick.
func TestCoreTour(t *testing.T) {
	ctx := context.Background()

	// snippet: core-tour
	// in memory; or a Nacos supplier: nacos.NewSupplier(...)
	reg := graylb.NewRegistry()
	// a prod instance, and a gray one: metadata gray=true
	reg.Register(graylb.NewInstance("user-service", "10.0.0.1", 8080, nil))
	reg.Register(graylb.NewInstance("user-service", "10.0.0.2", 8080, map[string]string{"gray": "true"}))

	picks := debugpage.NewPickCounters() // picks by kind and outcome, for the debug page
	lb, err := graylb.New(reg,
		graylb.WithFilters(filter.Version()),           // after the gray decision
		graylb.WithPolicy(policy.WeightedRoundRobin()), // default RoundRobin(); StrictRoundRobin(), Random(), P2C()
		graylb.WithObserver(picks.Observe),             // any func(service, kind, outcome)
	)
	if err != nil {
		log.Fatal(err)
	}
	defer lb.Close()

	prod, err := lb.Pick(ctx, "user-service") // 10.0.0.1: nothing made the request gray
	if err != nil {
		log.Print(err) // a kind with no instance: errors.Is(err, graylb.ErrNoInstance)
	}
	users, err := lb.Service("user-service") // one service, picked again and again
	if err != nil {
		log.Fatal(err)
	}
	gray, err := users.Pick(graylb.WithValue(ctx, "gray", "true")) // 10.0.0.2: as with a gray header
	// end snippet

	if err != nil {
		t.Fatal(err)
	}
	counts := picks.Counts("user-service")
	if prod.Addr() != "10.0.0.1:8080" || gray.Addr() != "10.0.0.2:8080" || counts["prod"]["selected"] != 1 || counts["gray"]["selected"] != 1 {
		t.Errorf("prod %s, gray %s, picks counted %v", prod.Addr(), gray.Addr(), counts)
	}
}

func TestPartition(t *testing.T) {
	reg := graylb.NewRegistry()
	for z, host := range map[string]string{"zone-a": "10.0.1.1", "zone-b": "10.0.2.1"} {
		in := graylb.NewInstance("pay", host, 80, nil)
		in.Cluster = z
		if err := reg.Register(in); err != nil {
			t.Fatal(err)
		}
	}

	// snippet: partition-filter
	zone := filter.Partition(200, "zone", // order (after the version filter, 100), request key
		func(in graylb.Instance) string { return in.Cluster }) // grouping, once per list change
	lb, err := graylb.New(reg, graylb.WithFilters(zone)) // per request: one lookup of "zone"
	// end snippet

	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	for _, z := range []string{"zone-a", "zone-b"} {
		in, err := lb.Pick(graylb.WithValue(context.Background(), "zone", z), "pay")
		if err != nil || in.Cluster != z {
			t.Errorf("zone %s: %v %v", z, in, err)
		}
	}
}

// The interfaces as docs/core.md shows them, with the core's types, and a
// test that they are the core's: the same methods, the same signatures.
type (
	BuildInfo = filter.BuildInfo
	Instance  = graylb.Instance
	Request   = filter.Request
)

// snippet: server-filter
type ServerFilter interface {
	Order() int               // lower first, all after the gray decision
	Build(in BuildInfo) Stage // once per list or rules change
}
type Stage interface {
	Subsets() [][]Instance
	Choose(r Request) int // per request: O(1), no allocation
}

// end snippet

func TestServerFilterIsTheCoresInterface(t *testing.T) {
	for _, pair := range [][2]reflect.Type{
		{reflect.TypeFor[ServerFilter](), reflect.TypeFor[graylb.ServerFilter]()},
		{reflect.TypeFor[Stage](), reflect.TypeFor[filter.Stage]()},
	} {
		shown, real := pair[0], pair[1]
		if shown.NumMethod() != real.NumMethod() {
			t.Errorf("%s: %d methods shown, %d in the core", real, shown.NumMethod(), real.NumMethod())
			continue
		}
		for i := 0; i < real.NumMethod(); i++ {
			s, r := shown.Method(i), real.Method(i)
			// The core's types are aliases of the engine's, and print as such.
			sig := strings.ReplaceAll(s.Type.String(), "docs.", "engine.")
			if s.Name != r.Name || sig != r.Type.String() {
				t.Errorf("%s: shown %s %s, the core has %s %s", real, s.Name, sig, r.Name, r.Type)
			}
		}
	}
}
