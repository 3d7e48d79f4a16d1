package graylb

import "github.com/graylb/graylb/internal/engine"

// Kind is a request's or an instance's side: Prod or Gray. It is written
// as "prod" or "gray" (String, and as text in JSON).
type Kind = engine.Kind

// The kinds.
const (
	Prod Kind = engine.Prod
	Gray Kind = engine.Gray
)

// KindOf reads a gray value: "true" in any letter case is Gray; anything
// else (absent, empty, "false", "yes", "1", " true") is Prod. Nothing is
// trimmed.
func KindOf(v string) Kind { return engine.KindOf(v) }

// IsGray reports whether KindOf(v) is Gray.
func IsGray(v string) bool { return engine.IsGray(v) }
