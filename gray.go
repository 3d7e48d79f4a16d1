package graylb

import "github.com/graylb/graylb/internal/engine"

// Default key names.
const (
	DefaultGrayHeader    = engine.DefaultGrayHeader
	DefaultGrayKey       = engine.DefaultGrayKey
	DefaultUserHeader    = engine.DefaultUserHeader
	DefaultVersionHeader = engine.DefaultVersionHeader
	DefaultVersionKey    = engine.DefaultVersionKey
)
