package graylb

import "github.com/graylb/graylb/internal/engine"

// Kind is a request's or an instance's side: Prod or Gray.
type Kind = engine.Kind

const (
	Prod = engine.Prod
	Gray = engine.Gray
)

// KindOf normalises a gray value: "true" in any letter case is Gray,
// anything else (absent, empty, "false", "yes", "1", " true") is Prod.
func KindOf(v string) Kind {
	return engine.KindOf(v)
}

// IsGray reports whether v is "true" in any ASCII letter case. Nothing is
// trimmed.
func IsGray(v string) bool {
	return engine.IsGray(v)
}

// KindSource says what decided a request's kind.
type KindSource = engine.KindSource

const (
	// FromDefault: nothing said anything; the request is prod.
	FromDefault = engine.FromDefault
	// FromKey: the gray key the call carries (a header, gRPC metadata).
	FromKey = engine.FromKey
	// FromContext: a value the program put on the context (WithValue).
	FromContext = engine.FromContext
	// FromSelf: the caller's own gray flag (WithSelfGray).
	FromSelf = engine.FromSelf
	// FromRules: a gray-user rule matched, or the canary was drawn.
	FromRules = engine.FromRules
)
