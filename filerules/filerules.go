// Package filerules is a graylb.RuleSource over a local JSON rule document
// (the format graylb.ParseRules reads), polled for changes:
//
//	src, err := filerules.New("/etc/app/rules.json")
//	...
//	lb, err := graylb.New(reg, graylb.WithRuleSource(src))
package filerules

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

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/internal/fanout"
)

// DefaultPollInterval is how often a Source checks its file unless
// WithPollInterval says otherwise.
const DefaultPollInterval = time.Second

// Source reads a JSON rule document from a local file and polls it for
// changes (the standard library has no file watcher). Replace the file
// atomically (write a new one and rename it over the old, as
// configuration managers do): a poll that reads a half-written file
// refuses it (logged and reported; the previous rules stay in force) and
// takes the whole document at the next poll. A document larger than
// graylb.MaxRulesSize is refused. It is safe for concurrent use.
type Source struct {
	path     string
	interval time.Duration
	logger   *slog.Logger
	refusals fanout.Set[func(error)]
}

// Option configures a Source.
type Option func(*Source)

// WithPollInterval sets how often the file is checked (default
// DefaultPollInterval; d <= 0 keeps it).
func WithPollInterval(d time.Duration) Option {
	return func(s *Source) {
		if d > 0 {
			s.interval = d
		}
	}
}

// WithLogger sets the logger for refused documents (default
// slog.Default(); nil keeps it).
func WithLogger(l *slog.Logger) Option {
	return func(s *Source) {
		if l != nil {
			s.logger = l
		}
	}
}

// New returns a Source that reads path. It reads nothing yet: the file
// may appear later. An empty path gives an error wrapping
// graylb.ErrInvalidRules.
func New(path string, opts ...Option) (*Source, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: empty rule file path", graylb.ErrInvalidRules)
	}
	s := &Source{path: path, interval: DefaultPollInterval, logger: slog.Default()}
	for _, o := range opts {
		if o != nil {
			o(s)
		}
	}
	return s, nil
}

// Describe returns "file " and the file's absolute path: what the debug
// page and RulesState show as the rules' source.
func (s *Source) Describe() string {
	if abs, err := filepath.Abs(s.path); err == nil {
		return "file " + abs
	}
	return "file " + s.path
}

// Load reads and parses the file. A document that does not parse or
// validate gives an error wrapping graylb.ErrInvalidRules that names the
// file.
func (s *Source) Load(ctx context.Context) (graylb.Rules, error) {
	data, err := s.read()
	if err != nil {
		return graylb.Rules{}, err
	}
	r, err := graylb.ParseRules(data)
	if err != nil {
		return graylb.Rules{}, fmt.Errorf("%s: %w", s.path, err)
	}
	return r, nil
}

func (s *Source) read() ([]byte, error) {
	f, err := os.Open(s.path)
	if err != nil {
		return nil, fmt.Errorf("graylb: rules: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, graylb.MaxRulesSize+1))
	if err != nil {
		return nil, fmt.Errorf("graylb: rules: %w", err)
	}
	return data, nil
}

// Watch polls the file until stop is called; each time its content
// changes and parses, fn is called with the new rules. A document that
// does not parse or validate is logged, reported to OnRefused's functions
// and skipped. A file that cannot be read is skipped silently until it
// can.
func (s *Source) Watch(fn func(graylb.Rules)) (stop func(), err error) {
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
			r, err := graylb.ParseRules(data)
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

// OnRefused calls fn with the error (wrapping graylb.ErrInvalidRules) of
// each document Watch refuses, once per change of the file, until stop is
// called. A LoadBalancer subscribes by itself, so RulesState counts these
// refusals.
func (s *Source) OnRefused(fn func(error)) (stop func()) {
	if fn == nil {
		return func() {}
	}
	return s.refusals.Add(fn)
}
