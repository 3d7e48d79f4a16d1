package kafkagray

import (
	"context"
	"strings"

	"github.com/graylb/graylb/adapter"
	"github.com/twmb/franz-go/pkg/kgo"
)

// headers is a record's headers as an adapter.Carrier and a
// graylb.ContextHandler (the record's own keys, whatever the context).
// Names match in any letter case. A *headers is the *kgo.Record,
// converted: using one allocates nothing.
type headers kgo.Record

var _ adapter.Carrier = (*headers)(nil)

func (h *headers) Get(name string) string {
	for _, kv := range h.Headers {
		if strings.EqualFold(kv.Key, name) {
			return valueString(kv.Value)
		}
	}
	return ""
}

func (h *headers) Set(name, value string) {
	h.Delete(name)
	h.Headers = append(h.Headers, kgo.RecordHeader{Key: name, Value: []byte(value)})
}

func (h *headers) Delete(name string) {
	kept := h.Headers[:0]
	for _, kv := range h.Headers {
		if !strings.EqualFold(kv.Key, name) {
			kept = append(kept, kv)
		}
	}
	clear(h.Headers[len(kept):])
	h.Headers = kept
}

// valueString returns b as a string, without allocating for "true" and
// "false", the values a gray key holds on nearly every record (a string
// cannot be modified: sharing one is safe, unlike a record's bytes).
func valueString(b []byte) string {
	switch {
	case string(b) == "true":
		return "true"
	case string(b) == "false":
		return "false"
	}
	return string(b)
}

// outgoing is a record's headers as the Carrier Stamp writes and the
// graylb.ContextHandler it decides with (the record is the call). It
// holds one pointer, so it is stored in an interface without allocating.
type outgoing struct{ *headers }

func (o outgoing) Value(_ context.Context, name string) string { return o.Get(name) }
