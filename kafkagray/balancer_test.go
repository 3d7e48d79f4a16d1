package kafkagray_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/kafkagray"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// member is one group member as the leader sees it: its id and the join
// metadata its own Link's balancer wrote.
type member struct {
	id     string
	gray   bool
	closed bool
}

// balance runs the group leader's assignment over members for topic "t"
// of n partitions, with 1 gray partition, and returns member id:
// partitions.
func balance(t *testing.T, n int32, ms ...member) map[string][]int32 {
	t.Helper()
	out, _ := balanceLinks(t, n, ms...)
	return out
}

// balanceLinks is balance that also returns each member's Link: every
// member parsed its own assignment from the leader's sync assignments.
func balanceLinks(t *testing.T, n int32, ms ...member) (map[string][]int32, map[string]*kafkagray.Link) {
	t.Helper()
	var join []kmsg.JoinGroupResponseMember
	var leader kgo.GroupBalancer
	links := map[string]*kafkagray.Link{}
	balancers := map[string]kgo.GroupBalancer{}
	for _, m := range ms {
		var opts []graylb.Option
		if m.closed {
			opts = append(opts, graylb.WithRules(graylb.Rules{Closed: true}))
		}
		l := newLink(t, newLB(t, append(opts, graylb.WithSelfGray(m.gray))...), kafkagray.WithGray(m.gray))
		b := l.Balancer()
		links[m.id], balancers[m.id] = l, b
		if leader == nil {
			leader = b
		}
		join = append(join, kmsg.JoinGroupResponseMember{MemberID: m.id, ProtocolMetadata: b.JoinGroupMetadata([]string{"t"}, nil, 1)})
	}
	mb, topics, err := leader.MemberBalancer(join)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := topics["t"]; !ok {
		t.Fatalf("topics %v, want t", topics)
	}
	into := mb.(kgo.GroupMemberBalancerOrError)
	plan, err := into.BalanceOrError(map[string]int32{"t": n})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]int32{}
	for _, sa := range plan.IntoSyncAssignment() {
		ts, err := balancers[sa.MemberID].ParseSyncAssignment(sa.MemberAssignment)
		if err != nil {
			t.Fatalf("member %s: %v", sa.MemberID, err)
		}
		out[sa.MemberID] = ts["t"]
	}
	// every partition assigned at most once
	seen := map[int32]string{}
	for id, ps := range out {
		for _, p := range ps {
			if o, dup := seen[p]; dup {
				t.Fatalf("partition %d assigned to %s and %s", p, o, id)
			}
			seen[p] = id
		}
	}
	return out, links
}

func TestBalancer_ProdPartitionsNeverToGray(t *testing.T) {
	got := balance(t, 4, member{id: "a"}, member{id: "b"}, member{id: "g", gray: true})
	if fmt.Sprint(got["g"]) != "[3]" {
		t.Fatalf("gray member got %v, want [3] (the gray partition)", got["g"])
	}
	if len(got["a"])+len(got["b"]) != 3 {
		t.Fatalf("prod members got %v and %v, want partitions 0-2 between them", got["a"], got["b"])
	}
}

func TestBalancer_GrayPartitionsToProdWhenNoGrayMember(t *testing.T) {
	got := balance(t, 4, member{id: "a"}, member{id: "b"})
	if len(got["a"])+len(got["b"]) != 4 {
		t.Fatalf("prod members got %v and %v, want all 4 partitions", got["a"], got["b"])
	}
}

func TestBalancer_ClosedSendsEverythingToProd(t *testing.T) {
	// One member's closed rules close the group, whichever member it is.
	for _, closedOne := range []string{"a", "g"} {
		got := balance(t, 4, member{id: "a", closed: closedOne == "a"}, member{id: "g", gray: true, closed: closedOne == "g"})
		if len(got["g"]) != 0 || len(got["a"]) != 4 {
			t.Fatalf("closed by %s: gray member got %v, prod %v; want none and all 4", closedOne, got["g"], got["a"])
		}
	}
}

// Only gray members: prod partitions wait for a prod member.
func TestBalancer_NoProdMemberLeavesProdPartitionsUnassigned(t *testing.T) {
	got := balance(t, 4, member{id: "g1", gray: true}, member{id: "g2", gray: true})
	for id, ps := range got {
		for _, p := range ps {
			if p != 3 {
				t.Fatalf("gray member %s got prod partition %d", id, p)
			}
		}
	}
}

// A member that does not run this balancer cannot make the leader assign
// blindly: the balance fails.
func TestBalancer_ForeignMemberIsAnError(t *testing.T) {
	b := newLink(t, newLB(t)).Balancer()
	other := kgo.RoundRobinBalancer().JoinGroupMetadata([]string{"t"}, nil, 1)
	mb, _, err := b.MemberBalancer([]kmsg.JoinGroupResponseMember{{MemberID: "x", ProtocolMetadata: other}})
	if err == nil {
		_, err = mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(map[string]int32{"t": 4})
	}
	if !errors.Is(err, kafkagray.ErrMemberMetadata) {
		t.Fatalf("err = %v, want ErrMemberMetadata", err)
	}
}
