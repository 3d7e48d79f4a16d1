package debugpage_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/debugpage"
	"github.com/graylb/graylb/httpctx"
	"github.com/graylb/graylb/shadow"
)

// registerServer registers srv as an instance of service in reg.
func registerServer(t *testing.T, reg *graylb.Registry, service string, srv *httptest.Server, md ...string) {
	t.Helper()
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	port, err := strconv.Atoi(u.Port())
	require.NoError(t, err)
	require.NoError(t, reg.Register(inst(service, port, md...)))
}

// The page shows the last copies whose answers differed, with both
// answers: hostile bodies escaped (HTML and JSON), a long body cut at
// ShownBody, control characters replaced, no header; the share in force.
func TestDebugHandlerShowsShadowDifferences(t *testing.T) {
	hostile := `<script>alert(1)</script>`
	prodSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Set-Cookie", "session=secret-prod")
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"name":"`+hostile+`","n":1}`)
	}))
	defer prodSrv.Close()
	long := strings.Repeat("é", debugpage.ShownBody) // 2 bytes each: cut inside the body, on a rune
	graySrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Set-Cookie", "session=secret-gray")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, "\x1b[31m"+`{"name":"</pre><img src=x onerror=alert(1)>","pad":"`+long+`"}`)
	}))
	defer graySrv.Close()
	reg := graylb.NewRegistry()
	registerServer(t, reg, "svc", prodSrv)
	registerServer(t, reg, "svc", graySrv, "gray", "true")
	differs := make(chan shadow.Event, 16)
	lb, err := graylb.New(reg, graylb.WithRules(graylb.Rules{ShadowPercent: 100}), shadow.WithObserver(func(e shadow.Event) {
		if e.Outcome == shadow.Differs {
			differs <- e
		}
	}))
	require.NoError(t, err)
	defer lb.Close()
	h := debugpage.Handler(lb)

	_, body := debugGet(t, h, "/?format=json")
	var st debugpage.State
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	require.Equal(t, 100.0, st.Shadow.Percent)
	require.Empty(t, st.Shadow.Diffs)
	_, page := debugGet(t, h, "/")
	require.Contains(t, page, `id="shadow-no-diffs"`)

	client := &http.Client{Transport: httpctx.NewTransport(lb, httpctx.WithMirror(shadow.WithNoiseSample(0)))}
	resp, err := client.Get("http://svc/items/42")
	require.NoError(t, err)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "prod's answer is returned")
	select {
	case <-differs:
	case <-time.After(10 * time.Second):
		t.Fatal("no difference told")
	}

	_, body = debugGet(t, h, "/?format=json")
	st = debugpage.State{}
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	require.Len(t, st.Shadow.Diffs, 1)
	d := st.Shadow.Diffs[0]
	require.Equal(t, "svc", d.Service)
	require.Equal(t, "GET /items/*", d.Route)
	require.True(t, d.Status)
	require.Equal(t, 200, d.Primary.Status)
	require.Equal(t, 500, d.Copy.Status)
	require.Contains(t, d.Primary.Body, hostile)
	require.True(t, d.Copy.Cut)
	require.Greater(t, d.Copy.BodyBytes, debugpage.ShownBody)
	require.LessOrEqual(t, len(d.Copy.Body), debugpage.ShownBody+len("\uFFFD"))
	require.True(t, strings.HasSuffix(d.Copy.Body, "é"), "cut on a rune's boundary")
	require.True(t, strings.HasPrefix(d.Copy.Body, "\uFFFD[31m"), "control characters replaced")
	require.NotContains(t, body, "<script", "the JSON escapes for HTML")
	require.NotContains(t, body, "secret", "no header is kept")

	resp2, page := debugGet(t, h, "/")
	require.Contains(t, resp2.Header.Get("Content-Security-Policy"), "default-src 'none'")
	require.Contains(t, page, `id="shadow-diffs"`)
	require.Contains(t, page, "&lt;script&gt;alert(1)&lt;/script&gt;")
	require.Contains(t, page, "&lt;/pre&gt;&lt;img src=x onerror=alert(1)&gt;")
	require.NotContains(t, page, "<script")
	require.NotContains(t, page, "<img")
	require.NotContains(t, page, "\x1b")
	require.NotContains(t, page, "secret")
	require.Contains(t, page, "(first 2048 shown)")
	require.Equal(t, 2, strings.Count(page, `<pre class="mono body">`))
}
