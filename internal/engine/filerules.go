package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/graylb/graylb/internal/fanout"
)

// FileRuleSource reads a JSON rule document from a local file and polls it
// for changes (the standard library has no file watcher). Replace the file
// atomically (write a new one and rename it over the old, as
// configuration managers do): a poll that reads a half-written file refuses
// it (logged and reported; the previous rules stay) and takes the whole
// document at the next poll.
type FileRuleSource struct {
	path     string
	interval time.Duration
	logger   *slog.Logger
	refusals fanout.Set[func(error)]
}

// Describe returns "file " and the file's absolute path (see Describer).
func (s *FileRuleSource) Describe() string {
	if abs, err := filepath.Abs(s.path); err == nil {
		return "file " + abs
	}
	return "file " + s.path
}

// FileOption configures a FileRuleSource.
type FileOption func(*FileRuleSource)

// WithPollInterval sets how often the file is checked (default 1s).
func WithPollInterval(d time.Duration) FileOption {
	return func(s *FileRuleSource) {
		if d > 0 {
			s.interval = d
		}
	}
}

// WithFileLogger sets the logger for refused documents (default slog.Default()).
func WithFileLogger(l *slog.Logger) FileOption {
	return func(s *FileRuleSource) {
		if l != nil {
			s.logger = l
		}
	}
}

// NewFileRuleSource returns a source that reads path.
func NewFileRuleSource(path string, opts ...FileOption) (*FileRuleSource, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: empty rule file path", ErrInvalidRules)
	}
	s := &FileRuleSource{path: path, interval: time.Second, logger: slog.Default()}
	for _, o := range opts {
		if o != nil {
			o(s)
		}
	}
	return s, nil
}

// Load reads and parses the file.
func (s *FileRuleSource) Load(ctx context.Context) (Rules, error) {
	data, err := s.read()
	if err != nil {
		return Rules{}, err
	}
	r, err := ParseRules(data)
	if err != nil {
		return Rules{}, fmt.Errorf("%s: %w", s.path, err)
	}
	return r, nil
}

func (s *FileRuleSource) read() ([]byte, error) {
	f, err := os.Open(s.path)
	if err != nil {
		return nil, fmt.Errorf("graylb: rules: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxRulesSize+1))
	if err != nil {
		return nil, fmt.Errorf("graylb: rules: %w", err)
	}
	return data, nil
}

// Watch polls the file; each time its content changes and parses, fn is
// called. A document that does not parse is logged, reported to OnRefused's
// functions and skipped.
func (s *FileRuleSource) Watch(fn func(Rules)) (func(), error) {
	if fn == nil {
		return nil, errors.New("graylb: rules: nil watch function")
	}
	last, _ := s.read()
	done := make(chan struct{})
	var once sync.Once
	go func() {
		t := time.NewTicker(s.interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			data, err := s.read()
			if err != nil || bytes.Equal(data, last) {
				continue
			}
			last = data
			r, err := ParseRules(data)
			if err != nil {
				s.logger.Error("graylb: rule document refused; previous rules stay in force", "path", s.path, "err", err)
				err = fmt.Errorf("%s: %w", s.path, err)
				for _, f := range s.refusals.Snapshot() {
					f(err)
				}
				continue
			}
			fn(r)
		}
	}()
	return func() { once.Do(func() { close(done) }) }, nil
}

// OnRefused calls fn with the error (wrapping ErrInvalidRules) of each
// document Watch refuses, once per change of the file, until stop is
// called (RefusalReporter).
func (s *FileRuleSource) OnRefused(fn func(error)) (stop func()) {
	if fn == nil {
		return func() {}
	}
	return s.refusals.Add(fn)
}

var _ RefusalReporter = (*FileRuleSource)(nil)
