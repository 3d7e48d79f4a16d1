package graylb

import "github.com/graylb/graylb/internal/engine"

// VersionFilter routes by version: a request's version (the "version"
// request key, else the lane a match rule gave it, else the caller's own
// version) selects the instances whose
// "version" metadata equals it; if there are none, the instances with no
// version; if there are none, every candidate. A request with no version
// goes to the instances with no version, else to every candidate. As one of
// the user's filters it runs after the gray decision and narrows what that
// left. Its request key is one of the LoadBalancer's Keys.
type VersionFilter = engine.VersionFilter

// VersionOption configures a VersionFilter.
type VersionOption = engine.VersionOption

// WithVersionHeader sets the request header (default "version").
func WithVersionHeader(name string) VersionOption {
	return engine.WithVersionHeader(name)
}

// WithVersionKey sets the instance metadata key (default "version").
func WithVersionKey(key string) VersionOption {
	return engine.WithVersionKey(key)
}

// WithSelfVersion sets the caller's own version, used when the request
// carries none.
func WithSelfVersion(v string) VersionOption {
	return engine.WithSelfVersion(v)
}

// WithVersionOrder sets the filter's order (default 100).
func WithVersionOrder(order int) VersionOption {
	return engine.WithVersionOrder(order)
}

// NewVersionFilter returns a VersionFilter.
func NewVersionFilter(opts ...VersionOption) *VersionFilter {
	return engine.NewVersionFilter(opts...)
}
