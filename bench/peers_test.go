package bench

import (
	"testing"

	"github.com/graylb/graylb/policy"
)

// TestPeersPickEquivalently keeps the comparison honest: every filtering
// peer answers both requests with instances of the right kind and version.
func TestPeersPickEquivalently(t *testing.T) {
	peers := append([]Peer{Graylb("round robin", policy.RoundRobin()), GraylbService("round robin", policy.RoundRobin()), SeedPort()}, KratosPeers()...)
	reqs := Requests()
	for _, p := range peers {
		for _, n := range []int{10, 100} {
			pk, err := p.Build(Instances(n))
			if err != nil {
				t.Fatalf("%s: %v", p.Name, err)
			}
			for i := 0; i < 50; i++ {
				in, err := pk.Pick(reqs[i&1])
				if err != nil {
					t.Fatalf("%s n=%d: %v", p.Name, n, err)
				}
				if !Expected(in, i&1 == 0) {
					t.Fatalf("%s n=%d: request gray=%v got %s %v", p.Name, n, i&1 == 0, in.Addr(), in.Metadata)
				}
			}
			pk.Close()
		}
	}
}

func TestGRPCFloorPicks(t *testing.T) {
	pk, err := GRPCRoundRobin().Build(Instances(10))
	if err != nil {
		t.Fatal(err)
	}
	defer pk.Close()
	seen := map[string]bool{}
	for i := 0; i < 30; i++ {
		in, err := pk.Pick(Requests()[0])
		if err != nil {
			t.Fatal(err)
		}
		seen[in.Addr()] = true
	}
	if len(seen) != 10 {
		t.Fatalf("round_robin reached %d of 10 instances", len(seen))
	}
}
