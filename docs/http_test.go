package docs

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/httpctx"
)

// docs/http.md: a service, and a public gateway.
func TestHTTPTour(t *testing.T) {
	reg := graylb.NewRegistry()
	httpService(t, reg, "order-service")
	lb, err := graylb.New(reg, graylb.WithRules(graylb.Rules{GrayUsers: []string{"alice"}}))
	if err != nil {
		log.Fatal(err)
	}
	defer lb.Close()
	mux := http.NewServeMux()
	// Stand-ins for your own checks: the caller's network, its verified token.
	isInternal := func(r *http.Request) bool { return r.Header.Get("X-Internal") == "yes" }
	authenticatedUser := func(r *http.Request) string {
		u, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer t-")
		return u
	}

	// snippet: http-tour
	client := &http.Client{Transport: httpctx.NewTransport(lb)}
	mux.HandleFunc("/orders/", func(w http.ResponseWriter, r *http.Request) {
		// pass r.Context(): the incoming gray, uid and version headers travel with it
		req, _ := http.NewRequestWithContext(r.Context(), "GET", "http://order-service/orders", nil)
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		io.Copy(w, resp.Body)
	})
	service := httpctx.Middleware(lb)(mux) // serve it: http.ListenAndServe(addr, service)

	// at a public gateway: untrusted callers cannot set any routing key; the user id comes from your auth
	gateway := httpctx.Middleware(lb, httpctx.WithTrusted(isInternal), httpctx.WithUser(authenticatedUser))(mux)
	// end snippet

	svc, gw := httptest.NewServer(service), httptest.NewServer(gateway)
	defer svc.Close()
	defer gw.Close()
	for _, c := range []struct {
		srv    *httptest.Server
		header []string
		want   string
	}{
		{svc, []string{"gray", "true"}, "order-service-gray gray=true"},
		{svc, nil, "order-service-prod gray="},
		{svc, []string{"uid", "alice"}, "order-service-gray gray=true"},
		{gw, []string{"gray", "true"}, "order-service-prod gray=false"},
		{gw, []string{"uid", "alice"}, "order-service-prod gray=false"},
		{gw, []string{"Authorization", "Bearer t-alice"}, "order-service-gray gray=true"},
		{gw, []string{"gray", "true", "X-Internal", "yes"}, "order-service-gray gray=true"},
	} {
		for i := 0; i < 2; i++ {
			if got := get(t, http.DefaultClient, c.srv.URL+"/orders/1", c.header...); got != c.want {
				t.Errorf("%v: %q, want %q", c.header, got, c.want)
			}
		}
	}
}
