package debugpage

import (
	"encoding/json"
	"html/template"
	"strconv"
	"time"

	"github.com/graylb/graylb"
)

func debugRulesJSON(r graylb.Rules) string {
	b, err := json.Marshal(r)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

var debugPage = template.Must(template.New("debug").Funcs(template.FuncMap{
	"rulesJSON": debugRulesJSON,
	"shownBody": func() int { return ShownBody },
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
pre.body { max-width: 40em; max-height: 16em; overflow: auto; white-space: pre-wrap; word-break: break-all; margin: .3em 0 0; background: #f6f8fa; padding: .3em; }
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

<h2>Shadow traffic</h2>
{{with .Shadow}}<p id="shadow-share">{{if .Percent}}<span id="shadow-percent">{{.Percent}}</span>% of prod requests (GET, HEAD, OPTIONS; gRPC methods marked idempotent) are mirrored to the gray build; the copies' answers are compared with prod's and discarded.{{else}}<span class="muted">No request is mirrored: the rules' shadowPercent is 0.</span>{{end}}</p>
{{if .Diffs}}<table id="shadow-diffs">
<tr><th>copy (last {{len .Diffs}}, newest first)</th><th>differed by</th><th>prod's answer (returned)</th><th>the gray build's (discarded)</th></tr>
{{range .Diffs}}<tr class="shadow-diff">
<td><span class="mono service">{{.Service}}</span><br><span class="mono route">{{.Route}}</span><br><span class="muted">{{.At.Format "2006-01-02T15:04:05.000Z07:00"}}</span></td>
<td class="by">{{if .Status}}<span class="tag">status</span>{{end}}{{if .Latency}}<span class="tag">latency</span>{{end}}{{if .Body}}<span class="tag">body</span>{{end}}{{with .Paths}}<br><span class="muted">at</span> {{range .}}<code class="path">{{.}}</code> {{end}}{{end}}</td>
{{with .Primary}}<td class="answer primary">{{template "answer" .}}</td>{{end}}
{{with .Copy}}<td class="answer copy">{{template "answer" .}}</td>{{end}}
</tr>
{{end}}</table>
<p class="muted">Bodies are shown up to {{shownBody}} bytes each, as text (invalid bytes and control characters replaced); no header is kept or shown. Fields that differ between two prod answers to one request (time stamps, ids) are learned as noise and not counted.</p>
{{else}}<p class="muted" id="shadow-no-diffs">No copy has differed from prod.</p>{{end}}{{end}}
{{range .Sections}}
<section class="extra" data-section="{{.Name}}">
<h2>{{.Name}}</h2>
{{if .Error}}<p class="bad section-error">{{.Error}}</p>{{else}}<pre class="mono section-value">{{printf "%s" .Value}}</pre>{{end}}
</section>
{{end}}
</body>
</html>
{{define "answer"}}{{if .Err}}<span class="bad err">{{.Err}}</span>{{else}}<span class="status">{{.Status}}</span> in <span class="latency">{{printf "%.1f" .LatencyMs}} ms</span>, {{.BodyBytes}} bytes{{if .NotKept}} <span class="muted">(longer than the mirror keeps: not compared)</span>{{end}}{{if .Cut}} <span class="muted">(first {{shownBody}} shown)</span>{{end}}{{end}}{{if .Body}}<pre class="mono body">{{.Body}}</pre>{{end}}{{end}}`
