package adapter

import (
	"github.com/graylb/graylb"
	"github.com/graylb/graylb/internal/engine"
)

// Baggage reads and writes routing keys carried as the members of one
// header of a call, as W3C baggage carries them (otelgraylb implements it
// with OpenTelemetry's parser). A LoadBalancer made WithBaggage reads them
// wherever an adapter admits a call (Admit), under the same trust boundary
// and key names as the call's own keys (a key the call carries wins over
// its member), strips them from an untrusted caller's header and context,
// and writes them where an adapter writes the next hop (Stamp).
// Implementations must be safe for concurrent use:
//
//	Header() string                                  // the header, lower case: "baggage"
//	Members(v string, names []string) []string       // the values in v of the members named (any letter case); "" each missing, nil when v does not parse
//	Without(v string, drop func(string) bool) string // v without the members drop names; "" when none is left or v does not parse
//	With(v string, pairs ...string) string           // v with the members name, value, name, value... set
//	ContextWithout(ctx, drop) context.Context        // ctx without those members in the baggage the context carries itself
type Baggage = engine.Baggage

// WithBaggage makes a LoadBalancer read and write routing keys in a
// call's baggage too (see Baggage): the option a package that implements
// Baggage hands its users (otelgraylb.WithBaggage).
func WithBaggage(b Baggage) graylb.Option { return engine.WithBaggage(b) }
