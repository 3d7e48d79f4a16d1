package graylb_test

import (
	"reflect"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/graylb/graylb"
)

// The user's API on *LoadBalancer is what a program calls; everything an
// adapter alone needs is in package adapter (package graylb's LoadBalancer is a defined type over the engine's, which
// declares only these). A method added
// to *LoadBalancer must be added here on purpose: one only adapters need
// (routing a call, reporting it, writing the decision, following rule or
// ejection changes, the Cache, the Policy) goes to package adapter.
func TestLoadBalancerMethodsAreTheUsersAPI(t *testing.T) {
	allowed := []string{
		"Close", "Ejections", "Keys", "Pick", "RulesState", "Service",
		"Services", "SetRules", "Snapshot", "Unrouted",
	}
	var got []string
	typ := reflect.TypeOf(&graylb.LoadBalancer{})
	for i := 0; i < typ.NumMethod(); i++ {
		got = append(got, typ.Method(i).Name)
	}
	sort.Strings(got)
	assert.Equal(t, allowed, got, "the exported methods of *LoadBalancer")
	for _, adapterOnly := range []string{
		"Route", "RouteWith", "Reroute", "RerouteWith", "NewRouter", "Report",
		"KindToPass", "KindToPassWith", "LaneToPass", "LaneToPassWith", "MatchKeys",
		"RequestKind", "OnEjectionChange", "OnRulesChange", "Policy", "Cache",
	} {
		_, ok := typ.MethodByName(adapterOnly)
		assert.False(t, ok, "%s is package adapter's, not the user's", adapterOnly)
	}
}
