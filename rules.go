package graylb

import "github.com/graylb/graylb/internal/engine"

// Rules are the run-time gray rules. The zero value routes by
// the gray header and metadata alone. Rules are data: load them from a file
// (package filerules), from Nacos config (the nacos package), or set them with
// LoadBalancer.SetRules.
//
// Precedence, strongest first: Closed (no request reaches a gray instance),
// then Enabled=false (every instance serves every request), then the
// request's kind, made gray by a GrayUsers match or, when nobody chose the
// request's side, by the first of Matches that matches, else by
// CanaryPercent. GrayAddresses only change which instances count as gray.
type Rules = engine.Rules

const // MaxRulesSize is the largest rule document accepted, in bytes.
MaxRulesSize = engine.MaxRulesSize

// ParseRules parses and validates a JSON rule document. It refuses, with
// an error wrapping ErrInvalidRules that names the problem, every document
// that could switch rules off by accident: anything but a JSON object
// (`null` included), an unknown key, a key in another letter case than
// documented ("Closed"), a key given twice, a key whose value is null,
// trailing data, and the value errors of Rules.Validate.
func ParseRules(data []byte) (Rules, error) {
	return engine.ParseRules(data)
}

// RuleSource supplies Rules and tells of changes. Sources validate what they
// load: a document that does not parse or validate is logged and skipped,
// and the previous rules stay in force.
//
// A source that implements Describer is shown by its description on the
// debug page and in RulesState.Source; any other by its Go type.
type RuleSource = engine.RuleSource

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
type Describer = engine.Describer
