package kafkagray

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ProtocolName is the group protocol of the gray-aware balancer: every
// member of a group must announce it.
const ProtocolName = "graylb-kind-v1"

// ErrMemberMetadata is returned (wrapped) when a member's metadata does not
// say its kind: a member of the group that does not run this balancer.
var ErrMemberMetadata = errors.New("kafkagray: member metadata without a kind")

// member kinds as announced in the user data: one byte for the kind, one
// for the rules.
const (
	userProd   = 'p'
	userGray   = 'g'
	userOpen   = 'o'
	userClosed = 'c'
)

// Balancer returns the group balancer that assigns partitions by kind
// (eager: every rebalance revokes every partition). Prod partitions go to
// prod members only, spread evenly in member order; gray partitions (the
// last N of each topic, WithGrayPartitions) to the gray members when at
// least one is in the group and no member's rules are closed, else to the
// prod members. A group with no prod member leaves its prod partitions
// unassigned until one joins: a prod record waits, it is never processed
// by a gray member.
func (l *Link) Balancer() kgo.GroupBalancer { return &balancer{l: l} }

type balancer struct{ l *Link }

var _ kgo.GroupBalancer = (*balancer)(nil)
var _ kgo.ConsumerBalancerBalance = (*balancer)(nil)

func (*balancer) ProtocolName() string { return ProtocolName }
func (*balancer) IsCooperative() bool  { return false }

// JoinGroupMetadata announces the member's kind and whether its rules are
// closed, read at each join.
// The metadata is version 0 (topics and user data): an eager balancer
// needs nothing of the later versions (owned partitions, generation, rack).
func (b *balancer) JoinGroupMetadata(interests []string, _ map[string][]int32, _ int32) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 0
	meta.Topics = interests
	meta.UserData = userData(b.l.gray, b.l.closed())
	return meta.AppendTo(nil)
}

func userData(gray, closed bool) []byte {
	d := []byte{userProd, userOpen}
	if gray {
		d[0] = userGray
	}
	if closed {
		d[1] = userClosed
	}
	return d
}

// ParseSyncAssignment returns this member's partitions, and records them
// with the topics' partitions the leader sent (Link.State).
func (b *balancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	assigned, topics, err := parseAssignment(assignment)
	if err != nil {
		return nil, err
	}
	b.l.synced(assigned, topics)
	return assigned, nil
}

func (b *balancer) MemberBalancer(members []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	cb, err := kgo.NewConsumerBalancer(b, members)
	if err != nil {
		return nil, nil, err
	}
	return cb, cb.MemberTopics(), nil
}

// Balance assigns topics' partitions (topic: partition count) by kind.
func (b *balancer) Balance(cb *kgo.ConsumerBalancer, topics map[string]int32) kgo.IntoSyncAssignment {
	type m struct {
		member *kmsg.JoinGroupResponseMember
		topics map[string]bool
	}
	var prod, gray []m
	closed := false
	var bad error
	cb.EachMember(func(member *kmsg.JoinGroupResponseMember, meta *kmsg.ConsumerMemberMetadata) {
		if len(meta.UserData) != 2 {
			bad = fmt.Errorf("%w: member %s", ErrMemberMetadata, member.MemberID)
			return
		}
		ts := make(map[string]bool, len(meta.Topics))
		for _, t := range meta.Topics {
			ts[t] = true
		}
		if meta.UserData[0] == userGray {
			gray = append(gray, m{member, ts})
		} else {
			prod = append(prod, m{member, ts})
		}
		closed = closed || meta.UserData[1] == userClosed
	})
	if bad != nil {
		cb.SetError(bad)
		return nil
	}
	plan := cb.NewPlan()
	names := sortedTopics(topics)
	sp := make(spans, len(names))
	assign := func(to []m, topic string, from, to_ int32) {
		var subs []m
		for _, x := range to {
			if x.topics[topic] {
				subs = append(subs, x)
			}
		}
		if len(subs) == 0 {
			return
		}
		for p := from; p < to_; p++ {
			plan.AddPartition(subs[int(p-from)%len(subs)].member, topic, p)
		}
	}
	for _, t := range names {
		n := topics[t]
		g := b.l.grayPartitions(n)
		assign(prod, t, 0, n-g)
		grayTo, toGray := gray, int32(1)
		if closed || g == 0 || !subscribed(gray, t, func(x m) map[string]bool { return x.topics }) {
			grayTo, toGray = prod, 0
		}
		if g == 0 && subscribed(gray, t, func(x m) map[string]bool { return x.topics }) {
			b.l.reportUnsplit(t, n)
		}
		sp[t] = [3]int32{n, g, toGray}
		assign(grayTo, t, n-g, n)
	}
	return syncPlan{plan: plan, spans: sp}
}

// subscribed reports whether a member of ms consumes topic.
func subscribed[M any](ms []M, topic string, topics func(M) map[string]bool) bool {
	for _, x := range ms {
		if topics(x)[topic] {
			return true
		}
	}
	return false
}
