package kafkagray

import (
	"context"
	"strings"

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
	return l.adm.Admit(ctx, c, adapter.Admission{Untrusted: l.untrusted})
}

// Handle calls fn with each record of fs and the context Context gives
// it, in the order fs holds them.
func (l *Link) Handle(ctx context.Context, fs kgo.Fetches, fn func(context.Context, *kgo.Record)) {
	fs.EachRecord(func(r *kgo.Record) { fn(l.Context(ctx, r), r) })
}

func equalFold(a, b string) bool { return strings.EqualFold(a, b) }
