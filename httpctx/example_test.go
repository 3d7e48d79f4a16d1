package httpctx_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/httpctx"
)

// A client whose requests to http://user-service/ go to the instance of the
// request's kind, with the gray header read from the outgoing request or
// from the incoming request being served (Middleware).
func Example() {
	gray := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "gray instance, gray header "+r.Header.Get("gray"))
	}))
	defer gray.Close()
	prod := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "prod instance")
	}))
	defer prod.Close()

	reg := graylb.NewRegistry()
	for srv, md := range map[*httptest.Server]map[string]string{gray: {"gray": "true"}, prod: nil} {
		u, _ := url.Parse(srv.URL)
		port, _ := strconv.Atoi(u.Port())
		reg.Register(graylb.NewInstance("user-service", u.Hostname(), port, md))
	}
	lb, _ := graylb.New(reg, graylb.WithContextHandler(httpctx.Handler()))
	defer lb.Close()
	client := &http.Client{Transport: httpctx.NewTransport(lb)}

	// A service's handler: the incoming gray header travels to its calls.
	api := httpctx.Middleware(lb)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://user-service/", nil)
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		io.Copy(w, resp.Body)
	}))
	edge := httptest.NewServer(api)
	defer edge.Close()

	for _, h := range []string{"true", ""} {
		req, _ := http.NewRequest(http.MethodGet, edge.URL, nil)
		req.Header.Set("gray", h)
		resp, _ := http.DefaultClient.Do(req)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(string(b))
	}
	// Output:
	// gray instance, gray header true
	// prod instance
}
