package graylb

import "github.com/graylb/graylb/internal/engine"

const // DefaultSeedRetry is how long the Cache remembers that the first query
// of a service failed (see WithSeedRetry).
DefaultSeedRetry = engine.DefaultSeedRetry
