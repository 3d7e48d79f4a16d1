package graylb

import "github.com/graylb/graylb/internal/engine"

// ServerFilter is one of the user's filters: it narrows, after the gray
// decision, the candidates a request may reach. Filters run in ascending
// Order (equal orders in the order given); the gray decision always runs
// before all of them, over the usable instances.
//
// Filtering is split in two so that a pick costs O(1): Build runs once per
// instance-list (or rules) change and partitions the candidates into the
// subsets the filter can yield; the Stage's Choose runs per request and only
// names one of those subsets. The next filter in the chain is built over
// each subset in turn. PartitionFilter writes the common case in one line.
type ServerFilter = engine.ServerFilter

// BuildInfo is what a filter is built over.
type BuildInfo = engine.BuildInfo

// Stage is a filter built over one candidate list.
type Stage = engine.Stage

// KeyReader is implemented by a ServerFilter that reads request keys
// (Request.Value): the LoadBalancer lists them in Keys().Filters, so the
// adapters propagate them from hop to hop and a trust boundary removes
// them from an untrusted caller's request, as it does the gray key. A
// filter that reads a key it does not declare is not covered by the trust
// boundary.
type KeyReader = engine.KeyReader

// PartitionFilter returns a ServerFilter that groups the candidates by
// key(instance) once per list change and, per request, narrows them to the
// group named by the request's value under requestKey; when no group has
// that name (or the request has none), every candidate stays. requestKey
// counts among the LoadBalancer's Keys (it is propagated, and stripped at
// a trust boundary). For example, a zone-affinity filter:
//
//	graylb.PartitionFilter(200, "zone", func(in graylb.Instance) string { return in.Cluster })
func PartitionFilter(order int, requestKey string, key func(Instance) string) ServerFilter {
	return engine.PartitionFilter(order, requestKey, key)
}
