package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"
	"unsafe"

	"github.com/graylb/graylb/internal/addr"
	"github.com/graylb/graylb/internal/cacheline"
)

// Rules is graylb.Rules.
type Rules struct {
	// Enabled turns gray routing on (nil or true) or off (false): when off
	// every instance serves every request.
	Enabled *bool `json:"enabled,omitempty"`
	// Closed is the rollback lever: no request reaches a gray instance;
	// gray requests go to prod.
	Closed bool `json:"closed,omitempty"`
	// GrayUsers: a request whose user header is one of these is gray,
	// whatever its gray header says.
	GrayUsers []string `json:"grayUsers,omitempty"`
	// GrayAddresses: an instance whose host or host:port is listed is gray,
	// whatever its metadata says. Entries and instances are compared in
	// canonical form: IP addresses as net/netip parses them (IPv4-mapped
	// ones unmapped), host names in ASCII lower case without a trailing
	// dot (localhost. is localhost), ports as numbers; an IPv6 address
	// with a port is written in brackets ([2001:db8::7]:8080). An entry
	// the C library reads as an IPv4 address written otherwise
	// (0x7f000001, 0x7f.0.0.0x1, 0177.0.0.1, 127.1), or that is
	// ambiguous (010.0.0.7, host.123), is refused with an error that says
	// what to write ("write 127.0.0.1"), as an instance at such a host is
	// (see Instance.Validate).
	GrayAddresses []string `json:"grayAddresses,omitempty"`
	// CanaryPercent (0-100, in steps of 0.01) of the requests whose kind was not
	// set explicitly (no header, no context value, caller not gray) go gray;
	// sticky by a hash of the user id when the request has one. A request
	// that says gray: false stays prod.
	CanaryPercent float64 `json:"canaryPercent,omitempty"`
	// Matches make a request whose side nobody chose gray, or give it a
	// version (a lane), by one of its keys; the first that matches wins
	// (see Match).
	Matches []Match `json:"matches,omitempty"`
	// ShadowPercent (0-100, in steps of 0.01) of the prod requests an
	// adapter may mirror (idempotent ones: see package shadow) are copied
	// to a gray instance of the same service, their answers compared and
	// never returned.
	ShadowPercent float64 `json:"shadowPercent,omitempty"`
}

// MaxRulesSize is graylb.MaxRulesSize.
const MaxRulesSize = 4 << 20

// Validate returns an error wrapping ErrInvalidRules when r is not usable.
func (r Rules) Validate() error {
	_, err := compileRules(r)
	return err
}

// ParseRules is graylb.ParseRules.
func ParseRules(data []byte) (Rules, error) {
	var r Rules
	if len(data) > MaxRulesSize {
		return r, fmt.Errorf("%w: document of %d bytes, at most %d", ErrInvalidRules, len(data), MaxRulesSize)
	}
	if err := checkKeys(data); err != nil {
		return r, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Rules{}, fmt.Errorf("%w: %v", ErrInvalidRules, err)
	}
	if err := r.Validate(); err != nil {
		return Rules{}, err
	}
	return r, nil
}

// ruleKeys and matchKeys are the JSON keys of Rules and of Match, exactly
// as documented.
var (
	ruleKeys  = jsonKeys(reflect.TypeOf(Rules{}))
	matchKeys = jsonKeys(reflect.TypeOf(Match{}))
)

func jsonKeys(t reflect.Type) map[string]bool {
	keys := map[string]bool{}
	for i := 0; i < t.NumField(); i++ {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			keys[name] = true
		}
	}
	return keys
}

// checkKeys checks the document: one JSON object whose keys are Rules'
// keys to the letter, each given once and not null, and likewise every
// object of its matches. encoding/json alone would accept null, let a
// repeated key win over the first, and match keys in any letter case.
func checkKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	fields, err := checkObject(dec, ruleKeys, "")
	if err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: trailing data after the document", ErrInvalidRules)
	}
	m, ok := fields["matches"]
	if !ok {
		return nil
	}
	dec = json.NewDecoder(bytes.NewReader(m))
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%w: matches: %v", ErrInvalidRules, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return fmt.Errorf("%w: matches is not a JSON array", ErrInvalidRules)
	}
	for i := 0; dec.More(); i++ {
		if _, err := checkObject(dec, matchKeys, fmt.Sprintf("matches[%d]: ", i)); err != nil {
			return err
		}
	}
	return nil
}

// checkObject reads one JSON object from dec whose keys are among keys, to
// the letter, each once and none null, and returns its fields. where
// prefixes the errors.
func checkObject(dec *json.Decoder, keys map[string]bool, where string) (map[string]json.RawMessage, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("%w: %s%v", ErrInvalidRules, where, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("%w: %snot a JSON object (it starts with %v)", ErrInvalidRules, where, tok)
	}
	fields := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: %s%v", ErrInvalidRules, where, err)
		}
		key, _ := tok.(string)
		if !keys[key] {
			return nil, fmt.Errorf("%w: %sunknown key %q (keys are case-sensitive)", ErrInvalidRules, where, key)
		}
		if _, dup := fields[key]; dup {
			return nil, fmt.Errorf("%w: %skey %q appears twice", ErrInvalidRules, where, key)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%w: %s%q: %v", ErrInvalidRules, where, key, err)
		}
		if string(v) == "null" {
			return nil, fmt.Errorf("%w: %skey %q is null", ErrInvalidRules, where, key)
		}
		fields[key] = v
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, fmt.Errorf("%w: %s%v", ErrInvalidRules, where, err)
	}
	return fields, nil
}

const canaryScale = 10000 // canary resolution: 0.01 %

// percent reads p, a percentage of the rules named name, out of
// canaryScale: within 0-100 and a multiple of 0.01.
func percent(name string, p float64) (uint32, error) {
	if math.IsNaN(p) || p < 0 || p > 100 {
		return 0, fmt.Errorf("%w: %s %v is not within 0-100", ErrInvalidRules, name, p)
	}
	v := uint32(math.Round(p * canaryScale / 100))
	if p > 0 && v == 0 {
		return 0, fmt.Errorf("%w: %s %v is below the resolution of 0.01", ErrInvalidRules, name, p)
	}
	if steps := p * 100; math.Abs(steps-math.Round(steps)) > 1e-6 {
		return 0, fmt.Errorf("%w: %s %v is not a multiple of 0.01 (the resolution)", ErrInvalidRules, name, p)
	}
	return v, nil
}

// compiledRules is Rules prepared for the pick path.
type compiledRules struct {
	compiledRulesFields
	_ [cacheline.Size - unsafe.Sizeof(compiledRulesFields{})%cacheline.Size]byte // whole cache lines (see package cacheline)
}

// compiledRulesFields are the fields of a compiledRules, which pads them to whole cache
// lines.
type compiledRulesFields struct {
	enabled bool
	closed  bool
	users   map[string]struct{}
	addrs   map[addrKey]struct{} // canonical (see addr.ParseAddress); port 0: every port
	zoned   map[addrKey]struct{} // the entries of addrs with a zone, without it
	canary  uint32               // out of canaryScale
	shadow  uint32               // out of canaryScale

	matches   []compiledMatch
	matchKeys []string // the keys the matches name, lower case, each once
}

var defaultCompiledRules = &compiledRules{compiledRulesFields: compiledRulesFields{enabled: true}}

func compileRules(r Rules) (*compiledRules, error) {
	c := &compiledRules{compiledRulesFields: compiledRulesFields{enabled: r.Enabled == nil || *r.Enabled, closed: r.Closed}}
	var err error
	if c.canary, err = percent("canaryPercent", r.CanaryPercent); err != nil {
		return nil, err
	}
	if c.shadow, err = percent("shadowPercent", r.ShadowPercent); err != nil {
		return nil, err
	}
	if len(r.GrayUsers) > 0 {
		c.users = make(map[string]struct{}, len(r.GrayUsers))
		for i, u := range r.GrayUsers {
			if u == "" {
				return nil, fmt.Errorf("%w: grayUsers[%d] is empty", ErrInvalidRules, i)
			}
			c.users[u] = struct{}{}
		}
	}
	if err := compileMatches(c, r.Matches); err != nil {
		return nil, err
	}
	if len(r.GrayAddresses) > 0 {
		c.addrs = make(map[addrKey]struct{}, len(r.GrayAddresses))
		for i, a := range r.GrayAddresses {
			k, err := addr.ParseAddress(a)
			if err != nil {
				return nil, fmt.Errorf("%w: grayAddresses[%d] %q: %v", ErrInvalidRules, i, a, err)
			}
			c.addrs[k] = struct{}{}
			if k.Host.Zone() != "" {
				if c.zoned == nil {
					c.zoned = map[addrKey]struct{}{}
				}
				k.Host = k.Host.WithoutZone()
				c.zoned[k] = struct{}{}
			}
		}
	}
	return c, nil
}

// grayAddress reports whether inst's host or host:port is a gray address,
// both compared in canonical form (see addr.ParseAddress): an instance at
// 2001:db8:0:0:0:0:0:7 port 8080 is gray under 2001:DB8::7 and under
// [2001:db8::7]:08080, one at ::ffff:10.0.0.7 under 10.0.0.7, one at
// HOST-A under host-a. An IPv6 zone on one side only does not tell two
// addresses apart: fe80::1 names fe80::1%eth0, and fe80::1%eth0 names
// fe80::1 (which link an address without a zone is on is unknown; gray is
// the side that keeps prod off it), while fe80::1%eth1 does not name
// fe80::1%eth0. It runs when routing is built, never per pick.
func (c *compiledRules) grayAddress(inst Instance) bool {
	if len(c.addrs) == 0 {
		return false
	}
	k := endpointOf(inst)
	if c.anyPort(c.addrs, k) {
		return true
	}
	if k.Host.Zone() != "" {
		k.Host = k.Host.WithoutZone()
		return c.anyPort(c.addrs, k)
	}
	return k.Host.IsIP() && len(c.zoned) > 0 && c.anyPort(c.zoned, k)
}

// anyPort reports whether set holds k's host with k's port or with every
// port.
func (c *compiledRules) anyPort(set map[addrKey]struct{}, k addrKey) bool {
	p := k.Port
	k.Port = 0
	if _, ok := set[k]; ok {
		return true
	}
	if p == 0 {
		return false
	}
	k.Port = p
	_, ok := set[k]
	return ok
}

// RuleSource is graylb.RuleSource.
type RuleSource interface {
	// Load returns the current rules.
	Load(ctx context.Context) (Rules, error)
	// Watch calls fn with each new valid rule set until stop is called.
	Watch(fn func(Rules)) (stop func(), err error)
}

// Describer is implemented by a RuleSource that can say where its rules
// come from in the words an operator would look for them with: the file
// path (package filerules), the Nacos group/dataId @ servers, the Redis
// layout and keys @ address. The debug page and RulesState.Source show
// it (cut to 512 bytes); a source that does not implement it, or
// describes itself as "", is shown by its Go type. A fmt.Stringer is not
// asked: a String method is often a dump of the value, not a text meant
// for an operator's page.
//
// The description is shown to whoever reads the debug page: it must hold
// no credential (password, token, access key, a URL's user information).
type Describer interface {
	// Describe returns where the source's rules come from.
	Describe() string
}
