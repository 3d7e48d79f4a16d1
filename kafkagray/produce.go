package kafkagray

import (
	"context"

	"github.com/graylb/graylb/shadow"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Stamp writes on r the routing state of the request served with ctx, for
// the consumer of r to route as the request did (adapter.Balancer.Stamp
// over r's headers): each key the request's server side admitted that r
// does not carry, the kind in its canonical spelling whenever something
// decided it (a key, rules, the canary, the producer's own flag), and the
// lane a match rule gave when r carries no version. A record produced
// outside any request, that nothing classified, carries no gray key
// (absent means prod, as for a request) unless ctx or the LoadBalancer's
// own flag (graylb.WithSelfGray) says gray. Rules closed while a gray
// request is served leave its records gray, as its HTTP and gRPC calls
// pass the gray key on: the group balancer hands the gray partitions to
// prod consumers while the rules are closed. Stamp is safe to call from
// many goroutines on different records.
func (l *Link) Stamp(ctx context.Context, r *kgo.Record) {
	if r == nil {
		return
	}
	l.b.Stamp(ctx, outgoing{(*headers)(r)}, nil)
}

// Produce stamps r (Stamp) and produces it with cl, as cl.Produce does:
// promise, when not nil, is called once with the result. For a shadow
// copy (package shadow) r is not produced: promise gets an error wrapping
// shadow.ErrWrite (unless shadow.AllowWrites).
func (l *Link) Produce(ctx context.Context, cl *kgo.Client, r *kgo.Record, promise func(*kgo.Record, error)) {
	if shadow.Refuses(ctx) {
		err := l.refuse(r)
		if promise != nil {
			promise(r, err)
		}
		return
	}
	l.Stamp(ctx, r)
	cl.Produce(ctx, r, promise)
}

// ProduceSync stamps each record (Stamp) and produces them with cl, as
// cl.ProduceSync does; for a shadow copy none is produced, each result
// carrying an error wrapping shadow.ErrWrite.
func (l *Link) ProduceSync(ctx context.Context, cl *kgo.Client, rs ...*kgo.Record) kgo.ProduceResults {
	if shadow.Refuses(ctx) {
		out := make(kgo.ProduceResults, len(rs))
		for i, r := range rs {
			out[i] = kgo.ProduceResult{Record: r, Err: l.refuse(r)}
		}
		return out
	}
	for _, r := range rs {
		l.Stamp(ctx, r)
	}
	return cl.ProduceSync(ctx, rs...)
}

// refuse is the error of a record a shadow copy would produce, told to the
// shadow observers.
func (l *Link) refuse(r *kgo.Record) error {
	topic := ""
	if r != nil {
		topic = r.Topic
	}
	shadow.Refused(l.b.LoadBalancer(), "", "record to "+topic)
	return &shadow.WriteError{Call: "record to topic " + topic}
}

// recordGray reports whether r is a gray record: its gray header is
// "true" in any letter case (graylb's normalisation; nothing is trimmed).
func (l *Link) recordGray(r *kgo.Record) bool {
	for _, kv := range r.Headers {
		if len(kv.Key) == len(l.grayKey) && equalFold(kv.Key, l.grayKey) {
			return len(kv.Value) == 4 && equalFold(string(kv.Value), "true")
		}
	}
	return false
}
