package graylb

import (
	"log/slog"
	"time"

	"github.com/graylb/graylb/internal/engine"
)

// FileRuleSource reads a JSON rule document from a local file and polls it
// for changes (the standard library has no file watcher). Replace the file
// atomically (write a new one and rename it over the old, as
// configuration managers do): a poll that reads a half-written file refuses
// it (logged and reported; the previous rules stay) and takes the whole
// document at the next poll.
type FileRuleSource = engine.FileRuleSource

// FileOption configures a FileRuleSource.
type FileOption = engine.FileOption

// WithPollInterval sets how often the file is checked (default 1s).
func WithPollInterval(d time.Duration) FileOption {
	return engine.WithPollInterval(d)
}

// WithFileLogger sets the logger for refused documents (default slog.Default()).
func WithFileLogger(l *slog.Logger) FileOption {
	return engine.WithFileLogger(l)
}

// NewFileRuleSource returns a source that reads path.
func NewFileRuleSource(path string, opts ...FileOption) (*FileRuleSource, error) {
	return engine.NewFileRuleSource(path, opts...)
}
