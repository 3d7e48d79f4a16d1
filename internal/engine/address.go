package engine

import "github.com/graylb/graylb/internal/addr"

// addrKey is an address in canonical form (see package addr): the key
// under which the rules' gray addresses, ejection and the Cache's shrink
// guard compare instances.
type addrKey = addr.Key

// endpointOf returns the canonical host and port of an instance, for
// comparing instances with each other (ejection, the Cache's shrink guard);
// a host addr.ParseHost refuses is kept as it is.
func endpointOf(in Instance) addrKey { return addr.Endpoint(in.Host, in.Port) }
