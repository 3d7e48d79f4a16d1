// A user's program on the root module (core + httpctx): a gray request and
// a prod request through the HTTP Transport reach the instance of their kind.
package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/httpctx"
)

func main() {
	reg := graylb.NewRegistry()
	for _, kind := range []string{"prod", "gray"} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			io.WriteString(w, kind)
		}))
		defer srv.Close()
		u, _ := url.Parse(srv.URL)
		port, _ := strconv.Atoi(u.Port())
		if err := reg.Register(graylb.NewInstance("user-service", u.Hostname(), port,
			map[string]string{"gray": strconv.FormatBool(kind == "gray")})); err != nil {
			fail(err)
		}
	}
	lb, err := graylb.New(reg, graylb.WithContextHandler(httpctx.Handler()))
	if err != nil {
		fail(err)
	}
	defer lb.Close()
	client := &http.Client{Transport: httpctx.NewTransport(lb)}
	for header, want := range map[string]string{"true": "gray", "false": "prod"} {
		req, _ := http.NewRequest(http.MethodGet, "http://user-service/", nil)
		req.Header.Set("gray", header)
		resp, err := client.Do(req)
		if err != nil {
			fail(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != want {
			fail(fmt.Errorf("gray: %s went to %q, want %q", header, b, want))
		}
	}
	fmt.Println("graylb + httpctx: a gray and a prod request each reached their kind")
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
