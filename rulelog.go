package graylb

import "github.com/graylb/graylb/internal/engine"

// RulesState is what the LoadBalancer knows of its rules.
type RulesState = engine.RulesState

// RulesState returns the rules in force, their source, and the last
// change and refusal.
func (lb *LoadBalancer) RulesState() RulesState {
	return (*engine.LoadBalancer)(lb).RulesState()
}
