package engine

import (
	"encoding/json"
	"html/template"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// PickCounters counts picks by service, request kind and outcome, for the
// debug page. Install its Observe method as the LoadBalancer's Observer
// (WithObserver(c.Observe)), or call it from an Observer of your own. It
// allocates nothing once a service has been seen, and keeps only the
// services the LoadBalancer knows and UnroutedService, under which the
// failed picks of every name it does not route are counted.
type PickCounters struct {
	mu       sync.Mutex // serialises adding a service
	services atomic.Pointer[map[string]*pickCounts]
}

type pickCounts [2][4]atomic.Uint64 // by Kind, then Outcome

// NewPickCounters returns empty counters.
func NewPickCounters() *PickCounters {
	c := &PickCounters{}
	c.services.Store(&map[string]*pickCounts{})
	return c
}

// Observe counts one pick; it has the signature of an Observer.
func (c *PickCounters) Observe(service string, kind Kind, outcome Outcome) {
	if kind > Gray || outcome > Failed {
		return
	}
	p := (*c.services.Load())[service]
	if p == nil {
		p = c.add(service)
	}
	p[kind][outcome].Add(1)
}

func (c *PickCounters) add(service string) *pickCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := *c.services.Load()
	if p := old[service]; p != nil {
		return p
	}
	m := make(map[string]*pickCounts, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	p := new(pickCounts)
	m[service] = p
	c.services.Store(&m)
	return p
}

// Counts returns the counts of service by request kind ("prod", "gray")
// and outcome ("selected", "fell_back", "bypassed", "failed"); nil when
// no pick of it was seen.
func (c *PickCounters) Counts(service string) map[string]map[string]uint64 {
	p := (*c.services.Load())[service]
	if p == nil {
		return nil
	}
	out := map[string]map[string]uint64{}
	for k := Prod; k <= Gray; k++ {
		m := map[string]uint64{}
		for o := Selected; o <= Failed; o++ {
			m[o.String()] = p[k][o].Load()
		}
		out[k.String()] = m
	}
	return out
}

// DebugOption configures DebugHandler.
type DebugOption func(*debugHandler)

// WithPickCounters shows c's counts on the page (install c.Observe as the
// LoadBalancer's Observer).
func WithPickCounters(c *PickCounters) DebugOption {
	return func(h *debugHandler) { h.picks = c }
}

// DebugHandler returns an http.Handler that shows lb's state for one
// process, as Envoy's /clusters or gRPC's channelz do: each routed
// service's instances (kind, version, weight, usability, ejection state,
// the subsets each lands in), the rules in force with their source and the
// times of the last change and of the last refusal with its error, the
// Cache's counters, and the pick counters when WithPickCounters is given.
//
// It serves an HTML page that needs nothing outside it (no script, no
// external style sheet) and, with ?format=json, the same data as JSON
// (DebugState). Every value is escaped: instance metadata comes from the
// registry and is untrusted. It answers GET and HEAD only, and changes
// nothing. Mount it where only operators reach it: it shows instance
// addresses, metadata and gray users.
func DebugHandler(lb *LoadBalancer, opts ...DebugOption) http.Handler {
	h := &debugHandler{lb: lb}
	for _, o := range opts {
		if o != nil {
			o(h)
		}
	}
	return h
}

type debugHandler struct {
	lb    *LoadBalancer
	picks *PickCounters
}

// DebugState is what DebugHandler shows, and its JSON: the
// LoadBalancer's own introspection types (Keys, ServiceState,
// UnroutedState, RulesState, CacheStats, EjectionsState), with the pick
// counters of WithPickCounters.
type DebugState struct {
	Generated time.Time      `json:"generated"`
	Keys      Keys           `json:"keys"`
	Services  []ServiceState `json:"services"` // lb.Snapshot of each of lb.Services
	// Picks are the pick counters' counts (PickCounters.Counts) of each
	// service listed and of UnroutedService; omitted without
	// WithPickCounters.
	Picks     map[string]map[string]map[string]uint64 `json:"picks,omitempty"` // service → kind → outcome → count
	Unrouted  UnroutedState                           `json:"unrouted"`        // lb.Unrouted
	Rules     RulesState                              `json:"rules"`
	Cache     CacheStats                              `json:"cache"`
	Ejections EjectionsState                          `json:"ejections"`
}

// state returns what the page shows now.
func (h *debugHandler) state() DebugState {
	lb := h.lb
	st := DebugState{Generated: time.Now(), Keys: lb.Keys(), Services: []ServiceState{},
		Unrouted: lb.Unrouted(), Rules: lb.RulesState(), Cache: lb.cache.Stats(), Ejections: lb.Ejections()}
	if h.picks != nil {
		st.Picks = map[string]map[string]map[string]uint64{}
		if c := h.picks.Counts(UnroutedService); c != nil {
			st.Picks[UnroutedService] = c
		}
	}
	for _, name := range lb.Services() {
		ss, ok := lb.Snapshot(name)
		if !ok {
			continue
		}
		st.Services = append(st.Services, ss)
		if h.picks != nil {
			if c := h.picks.Counts(name); c != nil {
				st.Picks[name] = c
			}
		}
	}
	return st
}

func (h *debugHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	hd := w.Header()
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	st := h.state()
	if r.URL.Query().Get("format") == "json" {
		hd.Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(st)
		return
	}
	hd.Set("Content-Type", "text/html; charset=utf-8")
	// Nothing but the page's own inline style: no script runs, whatever
	// the metadata says.
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'")
	_ = debugPage.Execute(w, st)
}

func debugRulesJSON(r Rules) string {
	b, err := json.Marshal(r)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

var debugPage = template.Must(template.New("debug").Funcs(template.FuncMap{
	"rulesJSON": debugRulesJSON,
	"ms": func(d time.Duration) string {
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + " ms"
	},
	"when": func(t *time.Time) string {
		if t == nil {
			return "never"
		}
		return t.Format(time.RFC3339)
	},
}).Parse(debugHTML))

const debugHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>graylb debug</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #1d2430; background: #fafbfc; }
h1 { font-size: 1.4em; margin: 0 0 .2em; }
h2 { font-size: 1.15em; margin: 1.4em 0 .4em; border-bottom: 1px solid #d0d7de; padding-bottom: .2em; }
h3 { font-size: 1em; margin: 1em 0 .3em; }
table { border-collapse: collapse; margin: .3em 0 1em; background: #fff; }
th, td { border: 1px solid #d0d7de; padding: .25em .6em; text-align: left; vertical-align: top; }
th { background: #eef1f4; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
code, .mono { font-family: ui-monospace, monospace; font-size: .92em; }
.kind-gray { color: #8250df; font-weight: 600; }
.kind-prod { color: #1a7f37; font-weight: 600; }
.bad { color: #cf222e; }
.muted { color: #6e7781; }
.tag { display: inline-block; border: 1px solid #d0d7de; border-radius: 3px; padding: 0 .35em; margin: 0 .15em .1em 0; background: #f6f8fa; }
</style>
</head>
<body>
<h1>graylb</h1>
<p class="muted">generated {{.Generated.Format "2006-01-02T15:04:05Z07:00"}} &middot; keys: gray <code>{{.Keys.Gray}}</code>, user <code>{{.Keys.User}}</code>, version <code>{{.Keys.Version}}</code> &middot; <a href="?format=json">JSON</a></p>

<h2>Rules</h2>
<table id="rules">
<tr><th>in force</th><td><code id="rules-in-force">{{rulesJSON .Rules.Rules}}</code></td></tr>
<tr><th>source</th><td id="rules-source">{{.Rules.Source}}</td></tr>
<tr><th>last change</th><td id="rules-changed">{{when .Rules.Changed}}</td></tr>
<tr><th>changes / refused</th><td><span id="rules-changes">{{.Rules.Changes}}</span> / <span id="rules-refused">{{.Rules.Refused}}</span></td></tr>
<tr><th>last refused</th><td id="rules-last-refused">{{when .Rules.LastRefused}}{{if .Rules.LastRefusedError}}: <span class="bad">{{.Rules.LastRefusedError}}</span>{{end}}{{with .Rules.LastRefusedRules}}<br><code>{{rulesJSON .}}</code>{{end}}</td></tr>
</table>

<h2>Instance-list cache</h2>
<table id="cache">
<tr><th>updates applied</th><th>empty updates refused</th><th>sudden shrinks held</th></tr>
<tr><td class="num" id="cache-applied">{{.Cache.Applied}}</td><td class="num" id="cache-refused-empty">{{.Cache.RefusedEmpty}}</td><td class="num" id="cache-held-shrinks">{{.Cache.HeldShrinks}}</td></tr>
</table>

<h2>Outlier ejection</h2>
{{with .Ejections}}{{if .Enabled}}<table id="ejections">
<tr><th>ejected now</th><th>ejections</th><th>readmissions</th><th>last</th></tr>
<tr><td class="num" id="ejected-now">{{.Ejected}}</td><td class="num" id="ejections-total">{{.Ejections}}</td><td class="num" id="readmissions-total">{{.Readmissions}}</td>
<td id="ejections-last">{{with .Last}}{{if .For}}ejected{{else}}readmitted{{end}} <span class="mono">{{.Service}} {{.Addr}}</span> ({{.Kind}}){{if .For}} for {{.For}}{{end}} at {{.At.Format "2006-01-02T15:04:05Z07:00"}}{{else}}<span class="muted">none</span>{{end}}</td></tr>
</table>
{{with .Counts}}<table id="ejection-counts">
<tr><th>service</th><th>instance kind</th><th>ejections</th><th>readmissions</th></tr>
{{range .}}<tr><td>{{.Service}}</td><td class="kind-{{.Kind}}">{{.Kind}}</td><td class="num">{{.Ejections}}</td><td class="num">{{.Readmissions}}</td></tr>
{{end}}</table>{{end}}{{else}}<p class="muted" id="ejections-off">Outlier detection is off.</p>{{end}}{{end}}

<h2>Names not routed</h2>
<table id="unrouted">
<tr><th>failed picks</th><td class="num" id="unrouted-failed">{{.Unrouted.Failed}}</td></tr>
</table>
{{with .Unrouted.Recent}}<table id="unrouted-recent">
<tr><th>name (last {{len .}}, newest first)</th><th>request kind</th><th>error</th><th>last failed</th></tr>
{{range .}}<tr class="unrouted-name"><td class="mono name">{{.Service}}</td><td class="kind-{{.Kind}}">{{.Kind}}</td><td class="bad error">{{.Error}}</td><td>{{.At.Format "2006-01-02T15:04:05Z07:00"}}</td></tr>
{{end}}</table>{{end}}
<p class="muted">Picks of names the balancer does not route &mdash; no instance ever (unknown to the registry, or listed with none), an invalid name, a failed first query &mdash; are counted here, not per name (names can come from untrusted input); the pick counters and metrics count them under the service <code>&lt;unrouted&gt;</code>.</p>

<h2>Services</h2>
{{if not .Services}}<p class="muted" id="no-services">No service routed yet: a service appears after its first pick.</p>{{end}}
{{range .Services}}
<section class="service" data-service="{{.Service}}">
<h3>{{.Service}} <span class="muted">&mdash; {{.Prod}} prod, {{.Gray}} gray{{if or .EjectedProd .EjectedGray}} routable; ejected: {{.EjectedProd}} prod, {{.EjectedGray}} gray{{end}}{{if .GrayFallback}}; no gray instance: gray requests fall back to every instance{{end}}</span></h3>
<table class="instances">
<tr><th>address</th><th>kind</th><th>version</th><th>weight</th><th>cluster</th><th>usable</th><th>ejection</th><th>serves (subsets)</th><th>metadata</th></tr>
{{range .Instances}}<tr class="instance">
<td class="mono addr">{{.Addr}}</td>
<td class="kind kind-{{.Kind}}">{{.Kind}}</td>
<td class="version">{{.Version}}</td>
<td class="num weight">{{.Weight}}</td>
<td>{{.Cluster}}</td>
<td class="usable">{{if .Usable}}yes{{else}}<span class="bad">no</span>{{end}}</td>
<td class="ejection">{{with .Stats}}{{if .Ejected}}<span class="bad ejected">ejected</span>{{else}}<span class="admitted">admitted</span>{{end}}<br><span class="muted">in flight <span class="inflight">{{.InFlight}}</span> &middot; latency <span class="latency">{{ms .Latency}}</span>{{if .Failures}} &middot; <span class="failures">{{.Failures}}</span> failures in a row{{end}}</span>{{else}}<span class="muted">&ndash;</span>{{end}}</td>
<td class="subsets">{{range .Subsets}}<span class="tag">{{.}}</span>{{end}}</td>
<td class="metadata mono">{{range $k, $v := .Metadata}}<span class="tag">{{$k}}={{$v}}</span>{{end}}</td>
</tr>
{{end}}</table>
{{with index $.Picks .Service}}<table class="picks">
<tr><th>request kind</th><th>selected</th><th>fell back</th><th>bypassed</th><th>failed</th></tr>
{{range $kind, $o := .}}<tr><td class="kind-{{$kind}}">{{$kind}}</td><td class="num">{{index $o "selected"}}</td><td class="num">{{index $o "fell_back"}}</td><td class="num">{{index $o "bypassed"}}</td><td class="num">{{index $o "failed"}}</td></tr>
{{end}}</table>{{end}}
</section>
{{end}}
<p class="muted">Subsets: <span class="tag">prod</span> serves prod requests, <span class="tag">gray</span> gray requests, <span class="tag">all</span> every request while gray routing is off or gray requests fall back.</p>
</body>
</html>
`
