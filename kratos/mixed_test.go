package graylbkratos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/go-kratos/kratos/v2/selector"
	"github.com/graylb/graylb"
	"github.com/graylb/graylb/httpctx"
	graylbkratos "github.com/graylb/graylb/kratos"
)

// startPlain starts a plain net/http service on httpctx: it answers
// "<name>-<kind>", followed by ">" and the answer of next when next is
// set (called through httpctx's Transport with the request's context).
func startPlain(t *testing.T, lb *graylb.LoadBalancer, name, kind, next string) string {
	t.Helper()
	client := &http.Client{Transport: httpctx.NewTransport(lb)}
	h := httpctx.Middleware(lb)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out := name + "-" + kind
		if next != "" {
			req, _ := http.NewRequestWithContext(r.Context(), "GET", "http://"+next+"/call", nil)
			resp, err := client.Do(req)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			defer resp.Body.Close()
			var got struct{ Chain string }
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			out += ">" + got.Chain
		}
		json.NewEncoder(w).Encode(map[string]string{"chain": out})
	}))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

// TestMixedChain: httpctx edge → Kratos A → httpctx C under a 50 % canary:
// the edge decides, Kratos reads the same header and writes it on, and
// every hop of one request lands on one kind.
func TestMixedChain(t *testing.T) {
	reg := graylb.NewRegistry()
	lb := newLB(t, reg, graylb.Rules{CanaryPercent: 50})
	b := graylbkratos.NewBuilder(lb)
	t.Cleanup(b.Close)
	selector.SetGlobalSelector(b)
	d := graylbkratos.NewDiscovery(reg)
	// C: plain services, registered without a kind (Kratos' HTTP client
	// finds them by their plain name).
	for _, gray := range []bool{false, true} {
		addr := startPlain(t, lb, "c", kindName(gray), "")
		host, port, _ := net.SplitHostPort(addr)
		var p int
		fmt.Sscan(port, &p)
		if err := reg.Register(graylb.NewInstance("c", host, p, map[string]string{"gray": fmt.Sprint(gray)})); err != nil {
			t.Fatal(err)
		}
	}
	toC := newCaller(t, "http", "c", d, graylbkratos.Client(lb))
	// A: Kratos services, registered as a.http.
	for _, gray := range []bool{false, true} {
		kind := kindName(gray)
		s := startServer(t, "http", func(ctx context.Context) (string, error) {
			r, err := toC(ctx)
			return "a-" + kind + ">" + r, err
		}, graylbkratos.Server(lb))
		register(t, reg, "a", s.endpoint, gray)
	}
	// The edge: a plain service calling a.http through httpctx.
	edge := startPlain(t, lb, "edge", "x", "a.http")
	const n = 1000
	mixed, gray := 0, 0
	for i := 0; i < n; i++ {
		resp, err := http.Get("http://" + edge + "/call")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var got struct{ Chain string }
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("request %d: %s", i, body)
		}
		parts := strings.Split(got.Chain, ">") // edge-x>a-<kind>>c-<kind>
		if len(parts) != 3 {
			t.Fatalf("request %d: %q", i, got.Chain)
		}
		if parts[1][2:] != parts[2][2:] {
			mixed++
			if mixed <= 3 {
				t.Errorf("request %d: mixed chain %q", i, got.Chain)
			}
		}
		if parts[1] == "a-gray" {
			gray++
		}
	}
	if mixed != 0 || gray < 400 || gray > 600 {
		t.Fatalf("%d mixed chains in %d, %d gray; want 0 mixed and 400-600 gray", mixed, n, gray)
	}
	t.Logf("httpctx -> Kratos -> httpctx: 0 mixed chains in %d, %d gray", n, gray)
}
