package graylb

import "github.com/graylb/graylb/internal/engine"

// Keys are the names of the request values the LoadBalancer reads: the
// gray value, the user id and the version. They are configured once, on
// the LoadBalancer (WithGrayHeader, WithUserHeader, and WithVersionHeader
// on its VersionFilter), and every
// adapter takes them from LoadBalancer.Keys: what the middleware and
// interceptors propagate, what a trust boundary drops, what the Transport
// writes.
type Keys = engine.Keys

// DefaultKeys returns the default names: gray, uid, version.
func DefaultKeys() Keys {
	return engine.DefaultKeys()
}

// Keys returns the names of the request values lb reads. A nil
// LoadBalancer has the default names.
func (lb *LoadBalancer) Keys() Keys {
	return (*engine.LoadBalancer)(lb).Keys()
}
