package engine

import "fmt"

// Kind is graylb.Kind.
type Kind uint8

// The kinds are graylb.Prod and graylb.Gray.
const (
	Prod Kind = iota
	Gray
)

func (k Kind) String() string {
	if k == Gray {
		return "gray"
	}
	return "prod"
}

// MarshalText writes the kind as its String ("prod", "gray"): the state
// types (ServiceState, EjectionsState...) carry kinds in their JSON as
// these words.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads "prod" or "gray" (as MarshalText writes them); any
// other text is an error.
func (k *Kind) UnmarshalText(b []byte) error {
	switch string(b) {
	case "prod":
		*k = Prod
	case "gray":
		*k = Gray
	default:
		if len(b) > 16 {
			return fmt.Errorf("graylb: kind %q... (%d bytes): want prod or gray", b[:16], len(b))
		}
		return fmt.Errorf("graylb: kind %q: want prod or gray", b)
	}
	return nil
}

// KindOf is graylb.KindOf.
func KindOf(v string) Kind {
	if IsGray(v) {
		return Gray
	}
	return Prod
}

// IsGray is graylb.IsGray.
func IsGray(v string) bool {
	// b|0x20 folds an upper-case ASCII letter to lower case; for these four
	// letters no other byte folds to the same value.
	return len(v) == 4 && v[0]|0x20 == 't' && v[1]|0x20 == 'r' && v[2]|0x20 == 'u' && v[3]|0x20 == 'e'
}

// KindSource is adapter.KindSource.
type KindSource uint8

// The sources are adapter.FromDefault and the others.
const (
	FromDefault KindSource = iota
	FromKey
	FromContext
	FromSelf
	FromRules
)

// Travels reports whether the next hop can see the decision without being
// told: only a key the call carries travels on its own (the adapters pass
// it on). For any other source an adapter writes the kind on the outgoing
// call, so every hop routes the same way.
func (s KindSource) Travels() bool { return s == FromKey || s == FromDefault }
