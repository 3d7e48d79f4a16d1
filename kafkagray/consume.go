package kafkagray

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Context admits r's headers as a server side admits an incoming call's
// keys (adapter.Admitter) and returns ctx carrying r's routing state: the
// calls the record's handler makes with it (HTTP, gRPC, Produce) route as
// the request that produced r did. With Untrusted, every routing key is
// first deleted from r's headers, in any letter case. r's headers are
// modified only then.
func (l *Link) Context(ctx context.Context, r *kgo.Record) context.Context {
	var c adapter.Carrier
	if r != nil {
		c = (*headers)(r)
	}
	return l.adm.Admit(ctx, c, adapter.Admission{Untrusted: l.untrusted, Queued: true})
}

// Handle calls fn with each record of fs of this consumer's kind and the
// context Context gives it, in the order fs holds them. Each record counts
// as handled ok (see HandleErr for handlers that fail).
//
// A record's kind decides who handles it, whoever produced it: a prod
// record reaching a gray consumer, or a gray record reaching a prod
// consumer while the group has a gray consumer, is not handed to fn but
// produced again, with the client given to Follow, to a partition of its
// kind (see Link.Partitioner), before Handle returns: commit after it. A
// producer that is not graylb's (a plain client, Spring Kafka) partitions
// by its own rule, and the records it misplaced reach their kind this way.
// On an Untrusted topic every record is prod. A record Handle could not
// produce again is handed to fn all the same, with an error logged
// (HandleErr returns the error instead).
func (l *Link) Handle(ctx context.Context, fs kgo.Fetches, fn func(context.Context, *kgo.Record)) {
	var other []*kgo.Record
	fs.EachRecord(func(r *kgo.Record) {
		gray := l.kindOf(r) // before Context: Untrusted deletes the keys
		if gray != l.gray && l.elsewhere(r.Topic, gray) {
			other = append(other, r)
			return
		}
		l.handle(ctx, r, gray, fn)
	})
	if len(other) > 0 {
		if err := l.reroute(ctx, other); err != nil {
			l.logger.Error("kafkagray: records of the other kind could not be produced again: handled here", "err", err)
			for _, r := range other {
				l.handle(ctx, r, l.kindOf(r), fn)
			}
		}
	}
}

// handle runs fn on r and counts it.
func (l *Link) handle(ctx context.Context, r *kgo.Record, gray bool, fn func(context.Context, *kgo.Record)) {
	if l.obs == nil {
		fn(l.Context(ctx, r), r)
		l.count(gray, true)
		return
	}
	start := time.Now()
	fn(l.Context(ctx, r), r)
	l.observe(r.Topic, gray, true, time.Since(start))
}

// HandleErr calls fn with each record of fs of this consumer's kind and
// the context Context gives it, in the order fs holds them, and counts
// each record by its kind and whether fn returned nil (ok) or an error
// (failed): in State, and with the RecordObserver of WithRecordObserver.
// Records of the other kind are produced again to a partition of their
// kind, as Handle does. A failed record does not stop the others: every
// record of fs is handled. It returns the first error fn returned,
// wrapped with its record's topic, partition and offset, or the error of
// producing records of the other kind again (do not commit then), or nil;
// what to do then (commit or not, retry) is the caller's choice.
func (l *Link) HandleErr(ctx context.Context, fs kgo.Fetches, fn func(context.Context, *kgo.Record) error) error {
	var first error
	var other []*kgo.Record
	fs.EachRecord(func(r *kgo.Record) {
		gray := l.kindOf(r)
		if gray != l.gray && l.elsewhere(r.Topic, gray) {
			other = append(other, r)
			return
		}
		var err error
		if l.obs == nil {
			err = fn(l.Context(ctx, r), r)
			l.count(gray, err == nil)
		} else {
			start := time.Now()
			err = fn(l.Context(ctx, r), r)
			l.observe(r.Topic, gray, err == nil, time.Since(start))
		}
		if err != nil && first == nil {
			first = fmt.Errorf("kafkagray: record %s/%d at offset %d: %w", r.Topic, r.Partition, r.Offset, err)
		}
	})
	if len(other) > 0 {
		if err := l.reroute(ctx, other); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// observe counts a handled record and reports it to the observer.
func (l *Link) observe(topic string, gray, ok bool, d time.Duration) {
	l.count(gray, ok)
	kind := graylb.Prod
	if gray {
		kind = graylb.Gray
	}
	l.obs.ObserveRecord(topic, l.group, kind, l.kind(), ok, d)
}

// count adds a handled record to the Link's counters.
func (l *Link) count(gray, ok bool) {
	k, o := 0, 0
	if gray {
		k = 1
	}
	if !ok {
		o = 1
	}
	l.consumed[k][o].Add(1)
}

// kind is this process's consumers' kind.
func (l *Link) kind() graylb.Kind {
	if l.gray {
		return graylb.Gray
	}
	return graylb.Prod
}

func equalFold(a, b string) bool { return strings.EqualFold(a, b) }
