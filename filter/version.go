package filter

import "github.com/graylb/graylb/internal/engine"

// VersionFilter routes by version. A request's version is its value under
// the version key (default "version"), else the lane a match rule gave it
// (graylb.Match), else the caller's own (WithSelfVersion). A request with
// a version goes to the candidates whose version metadata equals it; if
// none, to those with no version; if none, to every candidate. A request
// with no version goes to the candidates with no version, else to every
// candidate. Its order is 100 unless WithVersionOrder says otherwise; its
// request key is one of the LoadBalancer's Keys (Keys().Version).
type VersionFilter = engine.VersionFilter

// VersionOption configures a VersionFilter.
type VersionOption = engine.VersionOption

// Version returns a VersionFilter.
func Version(opts ...VersionOption) *VersionFilter { return engine.NewVersionFilter(opts...) }

// WithVersionHeader sets the request key that carries the version
// (default "version"; "" keeps it).
func WithVersionHeader(name string) VersionOption { return engine.WithVersionHeader(name) }

// WithVersionKey sets the instance metadata key that holds an instance's
// version (default "version"; "" keeps it).
func WithVersionKey(key string) VersionOption { return engine.WithVersionKey(key) }

// WithSelfVersion sets the caller's own version: a request's version when
// neither it nor a match rule gives one.
func WithSelfVersion(v string) VersionOption { return engine.WithSelfVersion(v) }

// WithVersionOrder sets the filter's order (default 100).
func WithVersionOrder(order int) VersionOption { return engine.WithVersionOrder(order) }
