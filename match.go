package graylb

import "github.com/graylb/graylb/internal/engine"

// Match is a match rule: a request whose key matches makes it gray, or
// gives it a version (a lane: what the VersionFilter routes by, as if the
// request carried it in its version key), or both. The key is any request
// key the adapters carry: a header, gRPC metadata, the user id. Exactly
// one condition is set: Exact, Prefix, Regex (RE2 syntax, matched against
// the whole value only when anchored with ^ and $), or Present (any
// non-empty value). At least one effect is set: Gray or Version.
//
// Match rules act like the canary: only on a request whose side nobody
// chose (no gray key, no context value, the caller not gray); a request
// that says gray: false opts out. The first matching rule decides the
// request's side (gray when Gray is set, prod otherwise: the canary does
// not draw it) and its lane. A version the request carries itself wins
// over the lane.
//
// At a trust boundary the keys a match names are routing keys: the
// adapters strip them from untrusted callers, so no untrusted key ever
// matches, and propagate them between trusted hops (package adapter's Balancer.MatchKeys).
type Match = engine.Match

// Bounds of match rules.
const (
	MaxMatches      = engine.MaxMatches
	MaxMatchKeyLen  = engine.MaxMatchKeyLen
	MaxMatchTextLen = engine.MaxMatchTextLen
	MaxRegexLen     = engine.MaxRegexLen
	MaxVersionLen   = engine.MaxVersionLen
)
