// Package filter holds graylb's ready-made filters (Version, Partition)
// and what a filter of one's own is written against. A filter is a
// graylb.ServerFilter given to graylb.WithFilters: it narrows, after the
// gray decision, the candidates a request may reach.
//
// A pick costs O(1) because filtering is split in two: Build runs once
// per instance-list or rules change and splits the candidates into the
// subsets the filter can yield (a Stage); the Stage's Choose runs on every
// pick and only names one of them. The next filter is built over each
// subset in turn.
package filter

import (
	"github.com/graylb/graylb"
	"github.com/graylb/graylb/internal/engine"
)

// BuildInfo is what a filter is built over:
//
//	Service   string
//	Instances []graylb.Instance // the candidates that reach the filter; read-only
type BuildInfo = engine.BuildInfo

// Stage is a filter built over one candidate list:
//
//	Subsets() [][]graylb.Instance // called once, right after Build
//	Choose(r Request) int         // per pick: the index of the request's subset
//
// Choose must not block and should not allocate; an index out of range
// means no instance.
type Stage = engine.Stage

// Request is what a Stage sees of one call: its Context and Service, and
//
//	Value(name string) string
//
// the call's value under name (a header, gRPC metadata, a value the
// program put on the context with graylb.WithValue), "" when absent; names
// are matched in any letter case.
type Request = engine.Request

// KeyReader is implemented by a filter that reads request keys through
// Request.Value:
//
//	RequestKeys() []string
//
// The LoadBalancer lists them in its Keys().Filters, so the adapters pass
// them on from hop to hop and a trust boundary removes them from an
// untrusted caller's request, as it does the gray key. A key a filter
// reads without declaring it is not covered by the trust boundary.
type KeyReader = engine.KeyReader

// Partition returns a filter that groups the candidates by key(instance)
// once per list change and, per request, narrows them to the group named
// by the request's value under requestKey; when no group has that name,
// or the request has none, every candidate stays. requestKey is declared
// (KeyReader). Filters run in ascending order; the Version filter's is 100.
// For example, zone affinity:
//
//	filter.Partition(200, "zone", func(in graylb.Instance) string { return in.Cluster })
func Partition(order int, requestKey string, key func(graylb.Instance) string) graylb.ServerFilter {
	return engine.PartitionFilter(order, requestKey, key)
}
