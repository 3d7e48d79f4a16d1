package debugpage_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/debugpage"
)

func TestDebugHandlerJSON(t *testing.T) {
	c := debugpage.NewPickCounters()
	lb, _ := newTestLB(t, []graylb.Instance{inst("svc", 9001, "version", "v1"), inst("svc", 9002, "gray", "true")},
		graylb.WithObserver(c.Observe))
	h := debugpage.Handler(lb, debugpage.WithPickCounters(c))

	_, body := debugGet(t, h, "/?format=json")
	var st debugpage.State
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	require.Empty(t, st.Services, "nothing routed yet")
	require.Nil(t, st.Rules.Changed)
	require.Equal(t, "program", st.Rules.Source)

	for i := 0; i < 3; i++ {
		_, err := lb.Pick(context.Background(), "svc")
		require.NoError(t, err)
	}
	_, err := lb.Pick(withHeaders(context.Background(), "gray", "true"), "svc")
	require.NoError(t, err)
	require.NoError(t, lb.SetRules(graylb.Rules{GrayUsers: []string{"alice"}}))
	require.Error(t, lb.SetRules(graylb.Rules{GrayUsers: []string{""}}))

	resp, body := debugGet(t, h, "/?format=json")
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	st = debugpage.State{}
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	require.Len(t, st.Services, 1)
	s := st.Services[0]
	require.Equal(t, "svc", s.Service)
	require.Equal(t, 1, s.Prod)
	require.Equal(t, 1, s.Gray)
	require.Equal(t, []string{"prod"}, s.Instances[0].Subsets)
	require.Equal(t, "v1", s.Instances[0].Version)
	require.Equal(t, graylb.Gray, s.Instances[1].Kind)
	require.True(t, s.Instances[1].Usable)
	require.Nil(t, s.Instances[1].Stats)
	require.Equal(t, uint64(3), st.Picks["svc"]["prod"]["selected"])
	require.Equal(t, uint64(1), st.Picks["svc"]["gray"]["selected"])
	require.Equal(t, []string{"alice"}, st.Rules.Rules.GrayUsers)
	require.NotNil(t, st.Rules.Changed)
	require.Equal(t, uint64(1), st.Rules.Refused)
	require.Contains(t, st.Rules.LastRefusedError, "grayUsers[0] is empty")
	require.NotNil(t, st.Rules.LastRefusedRules)
	require.False(t, st.Ejections.Enabled)
	require.Contains(t, body, `"stats": null`)
	require.Contains(t, body, `"kind": "gray"`)
}

func TestDebugHandlerEscapesMetadata(t *testing.T) {
	hostile := `<script>alert(1)</script>`
	lb, _ := newTestLB(t, []graylb.Instance{inst("svc", 9001,
		"note", hostile, hostile, "x", "version", `"><img src=x onerror=alert(1)>`, "cluster", "a&b")})
	require.NoError(t, lb.SetRules(graylb.Rules{GrayUsers: []string{"</code><script>1</script>"}}))
	_, err := lb.Pick(context.Background(), "svc")
	require.NoError(t, err)

	resp, body := debugGet(t, debugpage.Handler(lb), "/")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'none'")
	require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	require.NotContains(t, body, "<script")
	require.NotContains(t, body, "<img")
	require.Contains(t, body, "&lt;script&gt;alert(1)&lt;/script&gt;")
	// Nothing loads from outside the page.
	for _, s := range []string{"<link", "<img", "<iframe", "http://", "https://", "@import"} {
		require.NotContains(t, strings.ToLower(body), s)
	}
	require.NotRegexp(t, `<[a-z]+[^>]*\s(src|on[a-z]+)=`, body, "no element with a source or an event handler")
	// The JSON escapes for HTML too.
	_, js := debugGet(t, debugpage.Handler(lb), "/?format=json")
	require.NotContains(t, js, "<script")
}

func TestDebugHandlerMethods(t *testing.T) {
	lb, _ := newTestLB(t, []graylb.Instance{inst("svc", 9001)})
	h := debugpage.Handler(lb)
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(m, "/", strings.NewReader("x")))
		require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
		require.Equal(t, "GET, HEAD", rec.Header().Get("Allow"))
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodHead, "/", nil))
	require.Equal(t, http.StatusOK, rec.Code)
}

func TestPickCountersAllocateNothing(t *testing.T) {
	c := debugpage.NewPickCounters()
	c.Observe("svc", graylb.Gray, graylb.FellBack)
	require.Zero(t, testing.AllocsPerRun(1000, func() { c.Observe("svc", graylb.Gray, graylb.FellBack) }))
	c.Observe("svc", graylb.Kind(7), graylb.Outcome(9)) // out of range: ignored
	require.Equal(t, uint64(1001+1), c.Counts("svc")["gray"]["fell_back"])
	require.Nil(t, c.Counts("other"))
}

func TestDebugHandlerConcurrent(t *testing.T) {
	c := debugpage.NewPickCounters()
	lb, reg := newTestLB(t, []graylb.Instance{inst("svc", 9001), inst("svc", 9002, "gray", "true")}, graylb.WithObserver(c.Observe))
	h := debugpage.Handler(lb, debugpage.WithPickCounters(c))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			_, _ = lb.Pick(context.Background(), "svc")
			_ = lb.SetRules(graylb.Rules{CanaryPercent: float64(i % 50)})
			_ = reg.SetMetadata("svc", "127.0.0.1:9001", "n", strings.Repeat("x", i%7))
		}
	}()
	for i := 0; i < 50; i++ {
		resp, _ := debugGet(t, h, "/")
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	<-done
}
