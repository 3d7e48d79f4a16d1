package kafkagray

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrInvalidGroup is returned (wrapped) by New when WithGroup is given an
// empty group, no topic, or a name Kafka refuses.
var ErrInvalidGroup = errors.New("kafkagray: invalid consumer group")

// Registration metadata keys (Metadata): a consuming instance registered
// with them is listed by graylb status under its group, by kind.
const (
	// MetaGroup is the consumer group the instance consumes in.
	MetaGroup = "kafka.group"
	// MetaTopics are the topics it consumes, sorted, comma-separated.
	MetaTopics = "kafka.topics"
	// MetaKind is its consumers' kind in the group: "gray" or "prod"
	// (WithGray). It is the kind the group balancer goes by: gray
	// addresses in the rules do not change it.
	MetaKind = "kafka.kind"
	// MetaGrayPartitions is how many of each topic's partitions it takes
	// to be gray (WithGrayPartitions): every member must agree.
	MetaGrayPartitions = "kafka.grayPartitions"
)

// maxName is the longest topic name Kafka accepts.
const maxName = 249

// WithGroup names the consumer group the Link's consuming client joins and
// the topics it consumes there: they are shown by State, reported to the
// RecordObserver, written by Metadata into the instance's registration,
// and set on the client by ConsumerOpts. The group must be non-empty,
// printable and at most 249 bytes; each topic a Kafka topic name (ASCII
// letters, digits, '.', '_', '-'; 1 to 249 bytes; not "." or ".."). New
// refuses anything else with ErrInvalidGroup. A Link has one group: a
// process consuming two groups makes a Link for each.
func WithGroup(group string, topics ...string) Option {
	return func(l *Link) {
		if err := validGroup(group, topics); err != nil {
			l.badGroup = err
			return
		}
		ts := slices.Clone(topics)
		slices.Sort(ts)
		l.group, l.topics = group, slices.Compact(ts)
	}
}

func validGroup(group string, topics []string) error {
	if group == "" || len(group) > maxName || strings.IndexFunc(group, func(r rune) bool { return r < ' ' || r == 0x7f }) >= 0 {
		return fmt.Errorf("%w: group %q: want 1 to %d printable bytes", ErrInvalidGroup, group, maxName)
	}
	if len(topics) == 0 {
		return fmt.Errorf("%w: group %q: no topic", ErrInvalidGroup, group)
	}
	for _, t := range topics {
		if !validTopic(t) {
			return fmt.Errorf("%w: topic %q: want 1 to %d of ASCII letters, digits, '.', '_', '-' (not \".\" or \"..\")", ErrInvalidGroup, t, maxName)
		}
	}
	return nil
}

func validTopic(t string) bool {
	if t == "" || len(t) > maxName || t == "." || t == ".." {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Group returns the consumer group of WithGroup, or "".
func (l *Link) Group() string { return l.group }

// Metadata returns the entries to merge into the registration metadata of
// the instance that consumes with this Link (MetaGroup, MetaTopics,
// MetaKind, MetaGrayPartitions), for graylb status to list it as a
// consumer of its group. Without WithGroup it returns nil: the instance
// consumes nothing graylb can name. The map is the caller's.
func (l *Link) Metadata() map[string]string {
	if l.group == "" {
		return nil
	}
	return map[string]string{
		MetaGroup:          l.group,
		MetaTopics:         strings.Join(l.topics, ","),
		MetaKind:           l.kind().String(),
		MetaGrayPartitions: strconv.Itoa(int(l.grayParts)),
	}
}

// ConsumerOpts returns ClientOpts with, when WithGroup is given, the
// group and its topics (kgo.ConsumerGroup, kgo.ConsumeTopics): the options
// of a consuming client that consumes what the Link says it does.
func (l *Link) ConsumerOpts() []kgo.Opt {
	opts := l.ClientOpts()
	if l.group != "" {
		opts = append(opts, kgo.ConsumerGroup(l.group), kgo.ConsumeTopics(l.topics...))
	}
	return opts
}
