package graylb

import "github.com/graylb/graylb/internal/engine"

// Rules are the gray rules, data that changes at run time (SetRules,
// WithRules, WithRuleSource). The zero Rules route by the gray value and
// the gray metadata alone. In JSON (ParseRules):
//
//	Enabled       *bool    `json:"enabled"`       // false: gray routing off, every instance serves every request
//	Closed        bool     `json:"closed"`        // the rollback lever: no request reaches a gray instance
//	GrayUsers     []string `json:"grayUsers"`     // a request whose user id is listed is gray
//	GrayAddresses []string `json:"grayAddresses"` // an instance at a listed host or host:port is gray
//	CanaryPercent float64  `json:"canaryPercent"` // 0-100 in steps of 0.01 of the undecided requests go gray
//	Matches       []Match  `json:"matches"`       // the first that matches an undecided request decides it
//
// Precedence, strongest first: Closed (gray requests go to prod), then
// Enabled=false, then the request's kind: gray by its gray value, a
// GrayUsers match, or, for a request whose side nobody chose (no gray
// value, no context value, the caller not gray), the first of Matches
// that matches, else CanaryPercent, which is sticky by a hash of the
// user id when the request has one. A request that says gray: false is
// never made gray by Matches or CanaryPercent. GrayAddresses only change
// which instances count as gray; its entries and instance hosts are
// compared in canonical form (IP addresses as net/netip parses them,
// names in lower case without a trailing dot, an IPv6 address with a
// port in brackets), and an entry Instance.Validate would refuse as a
// host is refused.
//
// Validate() error says why rules are refused (an error wrapping
// ErrInvalidRules).
type Rules = engine.Rules

// Match is a match rule of Rules.Matches:
//
//	Key     string `json:"key"`     // a request key: a header, gRPC metadata, the user id
//	Exact   string `json:"exact"`   // one condition: the value is Exact,
//	Prefix  string `json:"prefix"`  // or starts with Prefix,
//	Regex   string `json:"regex"`   // or matches Regex (RE2; the whole value only when anchored with ^ and $),
//	Present bool   `json:"present"` // or is not empty
//	Gray    bool   `json:"gray"`    // one effect or both: the request is gray,
//	Version string `json:"version"` // and/or has this version (a lane for the version filter)
//
// The first matching Match decides the side of a request whose side
// nobody chose (gray when Gray is set, else prod: the canary does not
// draw it) and its lane; a version the request carries wins over the
// lane. The keys a Match names are routing keys: the adapters pass them
// on between trusted hops and drop them from an untrusted caller's
// request, so no untrusted key ever matches.
type Match = engine.Match

// ParseRules parses and validates a JSON rule document. It refuses, with
// an error wrapping ErrInvalidRules that names the problem, every document
// that could switch rules off by accident: anything but a JSON object
// (null included), an unknown key, a key in another letter case than
// documented ("Closed"), a key given twice, a key whose value is null,
// trailing data, a document over MaxRulesSize, and what Rules.Validate
// refuses.
func ParseRules(data []byte) (Rules, error) { return engine.ParseRules(data) }

// RuleSource supplies Rules and tells of changes:
//
//	Load(ctx context.Context) (Rules, error)
//	Watch(fn func(Rules)) (stop func(), err error) // fn gets each new valid Rules until stop
//
// A source validates what it loads: a document that does not parse or
// validate is logged and skipped, and the rules in force stay. A source
// may also have
//
//	Describe() string                           // where its rules come from, for RulesState.Source
//	OnRefused(fn func(err error)) (stop func()) // each document Watch refused, until stop
//
// Describe's text is shown to operators (cut to 512 bytes; "" shows the
// source's Go type instead) and must hold no credential. A LoadBalancer
// subscribes to OnRefused until Close, so RulesState counts those
// refusals; fn must not block. Package filerules and the nacos and
// redisrules modules implement both.
type RuleSource = engine.RuleSource
