package engine

import (
	"strings"
)

// Keys is graylb.Keys.
type Keys struct {
	Gray    string `json:"gray"`    // default "gray"
	User    string `json:"user"`    // default "uid"
	Version string `json:"version"` // default "version"
	// Filters are the request keys the LoadBalancer's own filters read
	// (see KeyReader), beside the version key.
	Filters []string `json:"filters,omitempty"`
	// Match are the keys the match rules in force name, when the Keys
	// came from LoadBalancer.Keys: a snapshot; rules change at run time,
	// so adapters read them per request instead (package adapter's
	// Balancer.MatchKeys).
	Match []string `json:"match,omitempty"`
	// GrayMetadata and VersionMetadata are the instance metadata keys of
	// the gray flag (WithGrayKey) and of the version (the VersionFilter's
	// WithVersionKey): what a registration of the same process writes.
	GrayMetadata    string `json:"grayMetadata,omitempty"`
	VersionMetadata string `json:"versionMetadata,omitempty"`
}

// DefaultKeys is graylb.DefaultKeys.
func DefaultKeys() Keys {
	return Keys{Gray: DefaultGrayHeader, User: DefaultUserHeader, Version: DefaultVersionHeader,
		GrayMetadata: DefaultGrayKey, VersionMetadata: DefaultVersionKey}
}

// Names returns the distinct names, in the order gray, user, version, the
// filters' keys, then the match keys. Header and metadata names are
// case-insensitive: two names that differ only in letter case count once.
func (k Keys) Names() []string {
	out := make([]string, 0, 3+len(k.Filters)+len(k.Match))
	all := append(append([]string{k.Gray, k.User, k.Version}, k.Filters...), k.Match...)
	for _, n := range all {
		dup := n == ""
		for _, o := range out {
			dup = dup || strings.EqualFold(o, n)
		}
		if !dup {
			out = append(out, n)
		}
	}
	return out
}

// Keys is graylb.LoadBalancer.Keys.
func (lb *LoadBalancer) Keys() Keys {
	if lb == nil {
		return DefaultKeys()
	}
	k := Keys{Gray: lb.gray.header, User: lb.gray.userHeader, Version: lb.versionHeader(),
		GrayMetadata: lb.gray.metaKey, VersionMetadata: lb.versionMeta}
	for _, f := range lb.filters {
		if kr, ok := f.(KeyReader); ok {
			k.Filters = append(k.Filters, kr.RequestKeys()...)
		}
	}
	if mk := lb.matchKeys(); len(mk) > 0 {
		k.Match = append([]string(nil), mk...)
	}
	return k
}

// versionHeader is the request key of the LoadBalancer's VersionFilter,
// the default when it has none.
func (lb *LoadBalancer) versionHeader() string { return lb.versionHdr }
