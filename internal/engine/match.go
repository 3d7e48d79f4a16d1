package engine

import (
	"fmt"
	"regexp"
	"strings"
)

// Match is graylb.Match.
type Match struct {
	Key     string `json:"key"`
	Exact   string `json:"exact,omitempty"`
	Prefix  string `json:"prefix,omitempty"`
	Regex   string `json:"regex,omitempty"`
	Present bool   `json:"present,omitempty"`
	Gray    bool   `json:"gray,omitempty"`
	Version string `json:"version,omitempty"`
}

// The bounds of match rules are graylb.MaxMatches and the others.
const (
	MaxMatches      = 256
	MaxMatchKeyLen  = 256
	MaxMatchTextLen = 4096
	MaxRegexLen     = 1024
	MaxVersionLen   = 256
)

// Conditions of a compiled match.
const (
	matchExact = iota
	matchPrefix
	matchRegex
	matchPresent
)

// compiledMatch is a Match prepared for the pick path.
type compiledMatch struct {
	key     string // lower case
	cond    uint8
	text    string
	re      *regexp.Regexp
	gray    bool
	version string
}

// matches reports whether value (the request's value of the key) matches.
func (m *compiledMatch) matches(value string) bool {
	if value == "" {
		return false
	}
	switch m.cond {
	case matchExact:
		return value == m.text
	case matchPrefix:
		return strings.HasPrefix(value, m.text)
	case matchRegex:
		return m.re.MatchString(value)
	}
	return true // present
}

// match returns the first match rule r matches, nil when none does.
func (c *compiledRules) match(r *Request) *compiledMatch {
	for i := range c.matches {
		m := &c.matches[i]
		if m.matches(r.value(m.key)) {
			return m
		}
	}
	return nil
}

// compileMatches validates and compiles the match rules into c.
func compileMatches(c *compiledRules, list []Match) error {
	if len(list) == 0 {
		return nil
	}
	if len(list) > MaxMatches {
		return fmt.Errorf("%w: %d matches, at most %d", ErrInvalidRules, len(list), MaxMatches)
	}
	c.matches = make([]compiledMatch, 0, len(list))
	for i, m := range list {
		cm, err := compileMatch(m)
		if err != nil {
			return fmt.Errorf("%w: matches[%d]: %v", ErrInvalidRules, i, err)
		}
		c.matches = append(c.matches, cm)
		if !containsString(c.matchKeys, cm.key) {
			c.matchKeys = append(c.matchKeys, cm.key)
		}
	}
	return nil
}

func compileMatch(m Match) (compiledMatch, error) {
	cm := compiledMatch{key: strings.ToLower(m.Key), gray: m.Gray, version: m.Version}
	if err := validToken(m.Key, MaxMatchKeyLen); err != nil {
		return cm, fmt.Errorf("key %q: %v", m.Key, err)
	}
	n := 0
	if m.Exact != "" {
		n++
		cm.cond, cm.text = matchExact, m.Exact
	}
	if m.Prefix != "" {
		n++
		cm.cond, cm.text = matchPrefix, m.Prefix
	}
	if m.Regex != "" {
		n++
		cm.cond = matchRegex
	}
	if m.Present {
		n++
		cm.cond = matchPresent
	}
	switch {
	case n == 0:
		return cm, fmt.Errorf("key %q: no condition (one of exact, prefix, regex, present)", m.Key)
	case n > 1:
		return cm, fmt.Errorf("key %q: %d conditions, exactly one of exact, prefix, regex, present", m.Key, n)
	case len(cm.text) > MaxMatchTextLen:
		return cm, fmt.Errorf("key %q: value of %d bytes, at most %d", m.Key, len(cm.text), MaxMatchTextLen)
	case !m.Gray && m.Version == "":
		return cm, fmt.Errorf("key %q: no effect (gray: true, or a version)", m.Key)
	}
	if m.Regex != "" {
		if len(m.Regex) > MaxRegexLen {
			return cm, fmt.Errorf("key %q: regex of %d bytes, at most %d", m.Key, len(m.Regex), MaxRegexLen)
		}
		re, err := regexp.Compile(m.Regex)
		if err != nil {
			return cm, fmt.Errorf("key %q: regex %q: %v", m.Key, m.Regex, err)
		}
		cm.re = re
	}
	if m.Version != "" {
		if err := validVersion(m.Version); err != nil {
			return cm, fmt.Errorf("key %q: version %q: %v", m.Key, m.Version, err)
		}
	}
	return cm, nil
}

// validToken accepts a header or metadata name: letters, digits and
// !#$%&'*+-.^_`|~, at most max bytes.
func validToken(s string, max int) error {
	if s == "" {
		return fmt.Errorf("empty")
	}
	if len(s) > max {
		return fmt.Errorf("%d bytes, at most %d", len(s), max)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return fmt.Errorf("not a header name (byte %q)", c)
		}
	}
	return nil
}

// validVersion accepts what can travel as a header or metadata value:
// visible ASCII, no space, at most MaxVersionLen bytes.
func validVersion(v string) error {
	if len(v) > MaxVersionLen {
		return fmt.Errorf("%d bytes, at most %d", len(v), MaxVersionLen)
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("byte %q is not visible ASCII", c)
		}
	}
	return nil
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// matchKeys returns the request keys named by the match rules in force, in
// lower case. Adapters read it per request (it does not allocate; do not
// modify the slice): the keys are propagated between trusted hops and
// stripped from untrusted callers like the LoadBalancer's other keys,
// with no configuration of their own. A nil LoadBalancer has none.
func (lb *LoadBalancer) matchKeys() []string {
	if lb == nil {
		return nil
	}
	return lb.rules.Load().matchKeys
}

// Lane returns the version a match rule gave the request ("" when none),
// for filters that route by it as the VersionFilter does.
func (r Request) Lane() string { return r.lane }
