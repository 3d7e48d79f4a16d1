package shadow

import (
	"fmt"
	"testing"

	"github.com/graylb/graylb"
)

// Routes beyond maxRoutes are counted as "other"; a route asks for a second
// prod answer on every call until two of its prod answers were compared,
// the "other" routes of a service included.
func TestMirror_RoutesBoundedAndSampledOnce(t *testing.T) {
	lb, err := graylb.New(graylb.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	m := NewMirror(lb, WithNoiseSample(0.000001))
	for i := range maxRoutes {
		if r, sampled := m.bounded("svc", fmt.Sprintf("GET /r%d", i)); r != fmt.Sprintf("GET /r%d", i) || sampled {
			t.Fatalf("route %d: %q, sampled %t", i, r, sampled)
		}
	}
	for _, route := range []string{"GET /x", "GET /y"} {
		if r, sampled := m.bounded("svc", route); r != "other" || sampled {
			t.Fatalf("%s past the bound: %q, sampled %t", route, r, sampled)
		}
	}
	a := &Answer{Status: 200, Body: []byte(`{"id":1,"v":"x"}`)}
	b := &Answer{Status: 200, Body: []byte(`{"id":2,"v":"x"}`)}
	for _, route := range []string{"GET /r0", "GET /z"} { // a route, and one past the bound ("other")
		tk := m.Begin("svc", route)
		if !tk.WantsSecondProd() {
			t.Fatalf("%s: no second prod answer asked before its noise was sampled", route)
		}
		tk.Primary(*a)
		tk.Second(*b)
		tk.Copy(*a) // the last answer: the ticket compares them, and learns
		if _, sampled := m.bounded("svc", route); !sampled {
			t.Fatalf("%s: not sampled after two prod answers were compared", route)
		}
		if tk := m.Begin("svc", route); tk.WantsSecondProd() {
			t.Fatalf("%s: a second prod answer asked once sampled (noise sample ~0)", route)
		}
	}
	if !m.noise["svc GET /r0"]["id"] || !m.noise["svc other"]["id"] {
		t.Fatalf("noise learned: %v", m.noise)
	}
}
