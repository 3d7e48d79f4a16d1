package graylb

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
// allocates nothing once a service has been seen, and keeps only services
// the LoadBalancer routes (an unknown name never reaches an Observer).
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

// DebugState is what DebugHandler shows, and its JSON.
type DebugState struct {
	Generated time.Time      `json:"generated"`
	Keys      DebugKeys      `json:"keys"`
	Services  []DebugService `json:"services"`
	Rules     DebugRules     `json:"rules"`
	Cache     DebugCache     `json:"cache"`
	Ejections DebugEjections `json:"ejections"`
}

// DebugKeys are the LoadBalancer's key names (Keys).
type DebugKeys struct {
	Gray    string `json:"gray"`
	User    string `json:"user"`
	Version string `json:"version"`
}

// DebugCache is the Cache's counters (CacheStats).
type DebugCache struct {
	Applied      uint64 `json:"applied"`
	RefusedEmpty uint64 `json:"refusedEmpty"`
	HeldShrinks  uint64 `json:"heldShrinks"`
}

// DebugEjections is outlier detection's part of the debug page
// (LoadBalancer.Ejections).
type DebugEjections struct {
	Enabled      bool                 `json:"enabled"`
	Ejected      int                  `json:"ejected"` // instances ejected now, over every routed service
	Ejections    uint64               `json:"ejections"`
	Readmissions uint64               `json:"readmissions"`
	Counts       []DebugEjectionCount `json:"counts"`
	Last         *DebugEjectionEvent  `json:"last"` // null: none yet
}

// DebugEjectionCount is the ejections and readmissions of one kind of
// instance of one service.
type DebugEjectionCount struct {
	Service      string `json:"service"`
	Kind         string `json:"kind"`
	Ejections    uint64 `json:"ejections"`
	Readmissions uint64 `json:"readmissions"`
}

// DebugEjectionEvent is one ejection (forMs > 0) or readmission (forMs
// 0).
type DebugEjectionEvent struct {
	Service string    `json:"service"`
	Addr    string    `json:"addr"`
	Kind    string    `json:"kind"`
	ForMs   int64     `json:"forMs"`
	At      time.Time `json:"at"`
}

// DebugInstanceStats is an instance's Stats on the debug page
// (InstanceStats); null when the LoadBalancer keeps none.
type DebugInstanceStats struct {
	Ejected   bool    `json:"ejected"`
	InFlight  int64   `json:"inFlight"`
	LatencyMs float64 `json:"latencyMs"` // peak-EWMA estimate; 0 before the first result
	Failures  int     `json:"failures"`  // consecutive
}

// DebugService is one service on the debug page.
type DebugService struct {
	Service      string                       `json:"service"`
	Prod         int                          `json:"prod"` // routable
	Gray         int                          `json:"gray"`
	EjectedProd  int                          `json:"ejectedProd"`
	EjectedGray  int                          `json:"ejectedGray"`
	GrayFallback bool                         `json:"grayFallback"`
	Instances    []DebugInstance              `json:"instances"`
	Picks        map[string]map[string]uint64 `json:"picks,omitempty"` // kind → outcome → count
}

// DebugInstance is one instance on the debug page.
type DebugInstance struct {
	Addr     string              `json:"addr"`
	Kind     string              `json:"kind"`
	Version  string              `json:"version"`
	Weight   float64             `json:"weight"`
	Cluster  string              `json:"cluster"`
	Usable   bool                `json:"usable"`
	Ejection *DebugInstanceStats `json:"ejection"`
	Subsets  []string            `json:"subsets"`
	Metadata map[string]string   `json:"metadata"`
}

// DebugRules is the rules part of the debug page.
type DebugRules struct {
	Rules            Rules      `json:"rules"`
	Source           string     `json:"source"`
	Changed          *time.Time `json:"changed"`
	Changes          uint64     `json:"changes"`
	Refused          uint64     `json:"refused"`
	LastRefused      *time.Time `json:"lastRefused"`
	LastRefusedRules *Rules     `json:"lastRefusedRules"`
	LastRefusedError string     `json:"lastRefusedError"`
}

// state returns what the page shows now.
func (h *debugHandler) state() DebugState {
	lb := h.lb
	cs := lb.Cache().Stats()
	k := lb.Keys()
	st := DebugState{Generated: time.Now(), Keys: DebugKeys{Gray: k.Gray, User: k.User, Version: k.Version}, Services: []DebugService{},
		Cache: DebugCache(cs)}
	for _, name := range lb.Services() {
		ss, ok := lb.Snapshot(name)
		if !ok {
			continue
		}
		ds := DebugService{Service: name, Prod: ss.Prod, Gray: ss.Gray, EjectedProd: ss.EjectedProd, EjectedGray: ss.EjectedGray, GrayFallback: ss.GrayFallback, Instances: []DebugInstance{}}
		st.Ejections.Ejected += ss.EjectedProd + ss.EjectedGray
		for _, in := range ss.Instances {
			di := DebugInstance{Addr: in.Addr, Kind: in.Kind.String(), Version: in.Version,
				Weight: in.Weight, Cluster: in.Cluster, Usable: in.Usable, Subsets: in.Subsets, Metadata: in.Metadata}
			if s := in.Stats; s != nil {
				di.Ejection = &DebugInstanceStats{Ejected: s.Ejected, InFlight: s.InFlight,
					LatencyMs: float64(s.Latency) / float64(time.Millisecond), Failures: s.Failures}
			}
			ds.Instances = append(ds.Instances, di)
		}
		if h.picks != nil {
			ds.Picks = h.picks.Counts(name)
		}
		st.Services = append(st.Services, ds)
	}
	es := lb.Ejections()
	st.Ejections.Enabled, st.Ejections.Ejections, st.Ejections.Readmissions = es.Enabled, es.Ejections, es.Readmissions
	st.Ejections.Counts = make([]DebugEjectionCount, 0, len(es.Counts))
	for _, c := range es.Counts {
		st.Ejections.Counts = append(st.Ejections.Counts, DebugEjectionCount{Service: c.Service, Kind: c.Kind.String(),
			Ejections: c.Ejections, Readmissions: c.Readmissions})
	}
	if e := es.Last; e != nil {
		st.Ejections.Last = &DebugEjectionEvent{Service: e.Service, Addr: e.Addr, Kind: e.Kind.String(),
			ForMs: e.For.Milliseconds(), At: es.LastAt}
	}
	rs := lb.RulesState()
	st.Rules = DebugRules{Rules: rs.Rules, Source: rs.Source, Changes: rs.Changes, Refused: rs.Refused,
		LastRefusedRules: rs.LastRefusedRules, LastRefusedError: rs.LastRefusedError}
	if !rs.Changed.IsZero() {
		st.Rules.Changed = &rs.Changed
	}
	if !rs.LastRefused.IsZero() {
		st.Rules.LastRefused = &rs.LastRefused
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
	"ms":        func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) + " ms" },
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
<tr><td class="num">{{.Cache.Applied}}</td><td class="num">{{.Cache.RefusedEmpty}}</td><td class="num">{{.Cache.HeldShrinks}}</td></tr>
</table>

<h2>Outlier ejection</h2>
{{with .Ejections}}{{if .Enabled}}<table id="ejections">
<tr><th>ejected now</th><th>ejections</th><th>readmissions</th><th>last</th></tr>
<tr><td class="num" id="ejected-now">{{.Ejected}}</td><td class="num" id="ejections-total">{{.Ejections}}</td><td class="num" id="readmissions-total">{{.Readmissions}}</td>
<td id="ejections-last">{{with .Last}}{{if .ForMs}}ejected{{else}}readmitted{{end}} <span class="mono">{{.Service}} {{.Addr}}</span> ({{.Kind}}){{if .ForMs}} for {{.ForMs}} ms{{end}} at {{.At.Format "2006-01-02T15:04:05Z07:00"}}{{else}}<span class="muted">none</span>{{end}}</td></tr>
</table>
{{with .Counts}}<table id="ejection-counts">
<tr><th>service</th><th>instance kind</th><th>ejections</th><th>readmissions</th></tr>
{{range .}}<tr><td>{{.Service}}</td><td class="kind-{{.Kind}}">{{.Kind}}</td><td class="num">{{.Ejections}}</td><td class="num">{{.Readmissions}}</td></tr>
{{end}}</table>{{end}}{{else}}<p class="muted" id="ejections-off">Outlier detection is off.</p>{{end}}{{end}}

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
<td class="ejection">{{with .Ejection}}{{if .Ejected}}<span class="bad ejected">ejected</span>{{else}}<span class="admitted">admitted</span>{{end}}<br><span class="muted">in flight <span class="inflight">{{.InFlight}}</span> &middot; latency <span class="latency">{{ms .LatencyMs}}</span>{{if .Failures}} &middot; <span class="failures">{{.Failures}}</span> failures in a row{{end}}</span>{{else}}<span class="muted">&ndash;</span>{{end}}</td>
<td class="subsets">{{range .Subsets}}<span class="tag">{{.}}</span>{{end}}</td>
<td class="metadata mono">{{range $k, $v := .Metadata}}<span class="tag">{{$k}}={{$v}}</span>{{end}}</td>
</tr>
{{end}}</table>
{{with .Picks}}<table class="picks">
<tr><th>request kind</th><th>selected</th><th>fell back</th><th>bypassed</th><th>failed</th></tr>
{{range $kind, $o := .}}<tr><td class="kind-{{$kind}}">{{$kind}}</td><td class="num">{{index $o "selected"}}</td><td class="num">{{index $o "fell_back"}}</td><td class="num">{{index $o "bypassed"}}</td><td class="num">{{index $o "failed"}}</td></tr>
{{end}}</table>{{end}}
</section>
{{end}}
<p class="muted">Subsets: <span class="tag">prod</span> serves prod requests, <span class="tag">gray</span> gray requests, <span class="tag">all</span> every request while gray routing is off or gray requests fall back.</p>
</body>
</html>
`
