package engine

import "context"

// Baggage is adapter.Baggage.
type Baggage interface {
	Header() string
	Members(v string, names []string) []string
	Without(v string, drop func(name string) bool) string
	With(v string, pairs ...string) string
	ContextWithout(ctx context.Context, drop func(name string) bool) context.Context
}

// WithBaggage is adapter.WithBaggage.
func WithBaggage(b Baggage) Option { return func(c *config) { c.baggage = b } }

// Baggage returns the Baggage the LoadBalancer reads and writes (nil:
// none).
func (lb *LoadBalancer) Baggage() Baggage { return lb.baggage }
