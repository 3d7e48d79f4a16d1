package debugpage_test

import (
	"context"
	"encoding/json"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/graylb/graylb/debugpage"
)

// jsonShape returns the key paths of the JSON of v ("a", "a.b", "list[].c"),
// sorted: the shape of the document, whatever its values.
func jsonShape(t *testing.T, v any) []string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var doc any
	require.NoError(t, json.Unmarshal(b, &doc))
	seen := map[string]bool{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				seen[p] = true
				walk(p, c)
			}
		case []any:
			for _, c := range x {
				walk(prefix+"[]", c)
			}
		}
	}
	walk("", doc)
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// noLatency zeroes the latency estimates of st: they decay with time, so
// two readings a moment apart differ.
func noLatency(st *graylb.ServiceState) {
	for i := range st.Instances {
		if s := st.Instances[i].Stats; s != nil {
			c := *s
			c.Latency = 0
			st.Instances[i].Stats = &c
		}
	}
}

// The debug page serves the LoadBalancer's introspection types as they
// are: its JSON has the keys of their JSON and decodes into them, equal to
// what the LoadBalancer reports. One model, not a mirror of it.
func TestDebugPageServesTheIntrospectionModel(t *testing.T) {
	list := mix("svc", nil, []string{"version", "v1"}, []string{"gray", "true", "note", "<b>x</b>"}, []string{"gray", "true"})
	lb, _, events := ejectionLB(t, list, graylb.OutlierConfig{BaseEjectionTime: 10 * time.Second})
	gray := withHeaders(context.Background(), "gray", "true")
	callsTo(t, lb, gray, list[3].Addr(), 1)[0].End(adapter.OK)
	failN(t, lb, gray, list[2].Addr(), 5)
	waitRebuild(t, events)
	require.NoError(t, lb.SetRules(graylb.Rules{GrayUsers: []string{"alice"}}))
	require.Error(t, lb.SetRules(graylb.Rules{CanaryPercent: 250}))

	_, body := debugGet(t, debugpage.Handler(lb), "/?format=json")
	var page struct {
		Keys      graylb.Keys           `json:"keys"`
		Services  []graylb.ServiceState `json:"services"`
		Rules     graylb.RulesState     `json:"rules"`
		Cache     graylb.CacheStats     `json:"cache"`
		Ejections graylb.EjectionsState `json:"ejections"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &page), "the page's JSON decodes into the introspection types")
	var raw map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(body), &raw))

	// The same keys: the page writes the types' own JSON.
	svc, ok := lb.Snapshot("svc")
	require.True(t, ok)
	var pageServices []json.RawMessage
	require.NoError(t, json.Unmarshal(raw["services"], &pageServices))
	require.Len(t, pageServices, 1)
	require.Equal(t, jsonShape(t, svc), jsonShape(t, pageServices[0]), "a service")
	require.Equal(t, jsonShape(t, lb.RulesState()), jsonShape(t, raw["rules"]), "the rules")
	require.Equal(t, jsonShape(t, lb.Ejections()), jsonShape(t, raw["ejections"]), "the ejections")
	require.Equal(t, jsonShape(t, adapter.For(lb).Cache().Stats()), jsonShape(t, raw["cache"]), "the cache")

	// The same values.
	require.Len(t, page.Services, 1)
	noLatency(&svc)
	noLatency(&page.Services[0])
	require.Equal(t, svc, page.Services[0])
	require.Equal(t, adapter.For(lb).Cache().Stats(), page.Cache)
	require.Equal(t, lb.Keys().Gray, page.Keys.Gray)
	rs := lb.RulesState()
	require.Equal(t, rs.Rules, page.Rules.Rules)
	require.Equal(t, rs.Source, page.Rules.Source)
	require.Equal(t, rs.LastRefusedError, page.Rules.LastRefusedError)
	require.Equal(t, rs.LastRefusedRules, page.Rules.LastRefusedRules)
	es := lb.Ejections()
	require.Equal(t, es.Counts, page.Ejections.Counts)
	require.Equal(t, es.Last.Addr, page.Ejections.Last.Addr)
	require.Equal(t, es.Last.Kind, page.Ejections.Last.Kind)
	require.Equal(t, es.Last.For, page.Ejections.Last.For)
}
