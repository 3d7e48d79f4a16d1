package graylb

import "github.com/graylb/graylb/internal/engine"

// Refiller is implemented by a Supplier whose registry can lose its
// instance lists and fill them again as its clients reconnect and register
// anew (a restarted registry server, a lost cluster node, a client that
// reconnected). While a refill is under way the lists it hands over may
// lack instances that are alive and only re-registering.
//
// RefillUntil returns the end of the current refill window; a zero or past
// time means the registry is settled and every list reflects deliberate
// registrations and deregistrations. It must be cheap and safe for
// concurrent use; the Cache calls it on list changes only.
type Refiller = engine.Refiller
