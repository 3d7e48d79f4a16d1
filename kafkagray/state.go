package kafkagray

import (
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/graylb/graylb"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// State is what a Link's consuming side looks like now, for an operator
// (the debug page's section, logs): it reads counters and the last
// assignment, and changes nothing.
type State struct {
	Kind graylb.Kind `json:"kind"` // this process's consumers' kind (WithGray)
	// RulesClosed: the rules in force are closed (the rollback lever):
	// this consumer announces it, and the group's gray partitions go to
	// prod members.
	RulesClosed    bool     `json:"rulesClosed"`
	Group          string   `json:"group,omitempty"` // WithGroup
	Topics         []string `json:"topics"`          // WithGroup
	GrayPartitions int      `json:"grayPartitions"`  // WithGrayPartitions: the last N of each topic
	// Assigned are the partitions assigned to this member at the last
	// rebalance, by topic; empty before the first one. Every rebalance
	// revokes them all (eager) and assigns them anew.
	Assigned map[string][]int32 `json:"assigned"`
	// TopicPartitions are, for each topic the group's leader balanced at
	// the last rebalance, its partition count and its gray partitions
	// (empty when the topic has too few partitions to keep one for prod).
	// Empty when the leader runs a kafkagray without them.
	TopicPartitions map[string]TopicPartitions `json:"topicPartitions"`
	// Consumed counts the records Handle and HandleErr handled, by the
	// record's kind (prod, gray) and outcome (ok, failed).
	Consumed map[string]map[string]uint64 `json:"consumed"`
	// LastRebalance is when this member was last assigned partitions;
	// nil before the first time. Rebalances counts the assignments.
	LastRebalance *time.Time `json:"lastRebalance"`
	Rebalances    uint64     `json:"rebalances"`
	// Rerouted counts the records of the other kind Handle and HandleErr
	// produced again to a partition of their kind instead of handling them.
	Rerouted uint64 `json:"rerouted"`
}

// TopicPartitions is one topic's partitions as the group's leader saw them.
type TopicPartitions struct {
	Partitions int32   `json:"partitions"`
	Gray       []int32 `json:"gray"`
	// GrayConsumers: the gray partitions went to gray members (one is
	// alive and the rules are open); prod members then produce the gray
	// records that reach them again to a gray partition.
	GrayConsumers bool `json:"grayConsumers"`
}

// assignment is what the balancer parsed at a sync.
type assignment struct {
	assigned map[string][]int32
	topics   map[string]TopicPartitions
	at       time.Time
	count    uint64
}

// State returns the Link's state now. It is safe to call at any time,
// from any goroutine. The assignment is the last one a client of this
// Link's balancer was given: a Link shared by several consuming clients
// shows whichever synced last (one consuming client per Link shows its
// own).
func (l *Link) State() State {
	st := State{Kind: l.kind(), RulesClosed: l.closed(), Group: l.group, Topics: slices.Clone(l.topics),
		GrayPartitions: int(l.grayParts), Assigned: map[string][]int32{}, TopicPartitions: map[string]TopicPartitions{},
		Consumed: map[string]map[string]uint64{}, Rerouted: l.rerouted.Load()}
	if st.Topics == nil {
		st.Topics = []string{}
	}
	for k, kind := range []string{"prod", "gray"} {
		st.Consumed[kind] = map[string]uint64{"ok": l.consumed[k][0].Load(), "failed": l.consumed[k][1].Load()}
	}
	l.mu.Lock()
	a := l.assignment
	l.mu.Unlock()
	if a != nil {
		at := a.at
		st.LastRebalance, st.Rebalances = &at, a.count
		for t, ps := range a.assigned {
			st.Assigned[t] = slices.Clone(ps)
		}
		for t, tp := range a.topics {
			tp.Gray = slices.Clone(tp.Gray)
			st.TopicPartitions[t] = tp
		}
	}
	return st
}

// synced records this member's assignment (the balancer parsed it).
func (l *Link) synced(assigned map[string][]int32, topics map[string]TopicPartitions) {
	a := &assignment{assigned: map[string][]int32{}, topics: topics, at: time.Now()}
	for t, ps := range assigned {
		ps = slices.Clone(ps)
		slices.Sort(ps)
		a.assigned[t] = ps
	}
	grayTo := make(map[string]bool, len(topics))
	for t, tp := range topics {
		grayTo[t] = tp.GrayConsumers
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.assignment != nil {
		a.count = l.assignment.count
	}
	a.count++
	l.assignment = a
	l.grayTo.Store(&grayTo)
}

// spans are the partition counts the leader balanced, handed to every
// member in its assignment's user data: topic → [partitions, gray, 1 when
// the gray partitions went to gray members]. A member that reads two
// numbers (an older kafkagray) ignores the third.
type spans map[string][3]int32

// syncPlan is the leader's plan, each member's assignment carrying the
// topics' partition counts and gray partitions in its user data (a member
// that parses only topics and partitions ignores it).
type syncPlan struct {
	plan  *kgo.BalancePlan
	spans spans
}

func (p syncPlan) IntoSyncAssignment() []kmsg.SyncGroupRequestGroupAssignment {
	user, _ := json.Marshal(p.spans) // a map of strings to int pairs: cannot fail
	plan := p.plan.AsMemberIDMap()
	members := slices.Sorted(maps.Keys(plan))
	out := make([]kmsg.SyncGroupRequestGroupAssignment, 0, len(members))
	for _, m := range members {
		a := kmsg.NewConsumerMemberAssignment()
		topics := slices.Sorted(maps.Keys(plan[m]))
		for _, t := range topics {
			at := kmsg.NewConsumerMemberAssignmentTopic()
			at.Topic = t
			at.Partitions = slices.Sorted(slices.Values(plan[m][t]))
			a.Topics = append(a.Topics, at)
		}
		a.UserData = user
		sa := kmsg.NewSyncGroupRequestGroupAssignment()
		sa.MemberID = m
		sa.MemberAssignment = a.AppendTo(nil)
		out = append(out, sa)
	}
	return out
}

// parseAssignment returns a member's assigned partitions and the topics'
// partitions the leader put in its user data (none when it put none or
// what it put does not parse: the assignment itself still counts).
func parseAssignment(b []byte) (map[string][]int32, map[string]TopicPartitions, error) {
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(b); err != nil {
		return nil, nil, err
	}
	assigned := make(map[string][]int32, len(a.Topics))
	for _, t := range a.Topics {
		assigned[t.Topic] = append(assigned[t.Topic], t.Partitions...)
	}
	topics := map[string]TopicPartitions{}
	var sp spans
	if len(a.UserData) > 0 && json.Unmarshal(a.UserData, &sp) == nil {
		for t, s := range sp {
			n, g := s[0], s[1]
			if n < 0 || g < 0 || g > n {
				continue
			}
			tp := TopicPartitions{Partitions: n, Gray: []int32{}, GrayConsumers: s[2] == 1 && g > 0}
			for p := n - g; p < n; p++ {
				tp.Gray = append(tp.Gray, p)
			}
			topics[t] = tp
		}
	}
	return assigned, topics, nil
}

// sortedTopics returns the names of topics, sorted.
func sortedTopics(topics map[string]int32) []string {
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	sort.Strings(names)
	return names
}
