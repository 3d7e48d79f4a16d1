package graylb

import "github.com/graylb/graylb/internal/engine"

// Supplier gives the instance list of a service and tells of changes. The
// in-memory Registry and the nacos package's supplier implement it.
// Implementations must be safe for concurrent use; lists they hand over are
// read-only from then on.
type Supplier = engine.Supplier
