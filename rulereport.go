package graylb

import "github.com/graylb/graylb/internal/engine"

// RefusalReporter is implemented by a RuleSource that can tell of the rule
// documents it refuses while watching: a document written after the first
// Load that does not parse or validate, which Watch skips (the previous
// rules stay in force). New subscribes when its rule source implements
// it, so RulesState, the debug page and the rules-refused metric count
// those refusals too, not only the rules SetRules and the first Load
// refuse. The subscription ends with Close.
type RefusalReporter = engine.RefusalReporter
