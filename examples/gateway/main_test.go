package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestOnce(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), config{once: true}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
}

func newDemo(t *testing.T, canary float64, h *hooks) *demo {
	t.Helper()
	d, err := start(config{listen: "127.0.0.1:0", canary: canary}, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.close)
	return d
}

func get(t *testing.T, d *demo, path string, header ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, d.url+path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestEdgeToServiceToService goes edge → gateway → user-service →
// order-service with a real HTTP client.
func TestEdgeToServiceToService(t *testing.T) {
	d := newDemo(t, 0, nil)
	for _, c := range []struct {
		title  string
		header []string
		want   string
	}{
		{"anonymous", nil, "user-prod > order-prod[uid=]"},
		{"alice: a gray user by rules", []string{"Authorization", "Bearer t-alice"}, "user-gray > order-gray[uid=alice]"},
		{"bob", []string{"Authorization", "Bearer t-bob"}, "user-prod > order-prod[uid=bob]"},
		{"bob says gray: untrusted, dropped", []string{"Authorization", "Bearer t-bob", "gray", "true"}, "user-prod > order-prod[uid=bob]"},
		{"bob says GRAY twice", []string{"Authorization", "Bearer t-bob", "GRAY", "true", "gray", "TRUE"}, "user-prod > order-prod[uid=bob]"},
		{"bob claims to be alice by header", []string{"Authorization", "Bearer t-bob", "uid", "alice"}, "user-prod > order-prod[uid=bob]"},
		{"anonymous claims alice", []string{"uid", "alice"}, "user-prod > order-prod[uid=]"},
		{"a forged token", []string{"Authorization", "Bearer t-al ice"}, "user-prod > order-prod[uid=]"},
		{"qa says gray: trusted", []string{"Authorization", "Bearer t-qa", "gray", "true"}, "user-gray > order-gray[uid=qa]"},
		{"qa without a header", []string{"Authorization", "Bearer t-qa"}, "user-prod > order-prod[uid=qa]"},
	} {
		for i := 0; i < 2; i++ { // round robin would alternate if the decision were lost
			status, body := get(t, d, "/users/1", c.header...)
			if status != http.StatusOK || body != c.want {
				t.Errorf("%s: %d %q, want %q", c.title, status, body, c.want)
			}
		}
	}
	if status, _ := get(t, d, "/nowhere"); status != http.StatusNotFound {
		t.Errorf("unrouted path: %d", status)
	}
	// Straight to order-service by its prefix.
	if _, body := get(t, d, "/orders/7", "Authorization", "Bearer t-alice"); body != "order-gray[uid=alice]" {
		t.Errorf("/orders/: %q", body)
	}
}

func TestCanaryIsStickyPerUser(t *testing.T) {
	d := newDemo(t, 50, nil)
	sides := map[string]int{}
	for u := 0; u < 40; u++ {
		var first string
		for k := 0; k < 3; k++ {
			_, body := get(t, d, "/users/1", "Authorization", fmt.Sprintf("Bearer t-user%d", u))
			side, _, _ := strings.Cut(body, " > ")
			if k == 0 {
				first = side
				sides[side]++
			} else if side != first {
				t.Fatalf("user%d moved from %s to %s", u, first, side)
			}
			if want := strings.Replace(side, "user", "order", 1); !strings.Contains(body, want) {
				t.Fatalf("user%d: %q mixes kinds", u, body)
			}
		}
	}
	if sides["user-gray"] == 0 || sides["user-prod"] == 0 {
		t.Errorf("a 50%% canary over 40 users: %v", sides)
	}
}

// TestStreamedResponse checks that each chunk reaches the client before
// the service writes the next one: the gateway flushes, chunked.
func TestStreamedResponse(t *testing.T) {
	h := &hooks{next: make(chan struct{})}
	d := newDemo(t, 0, h)
	req, _ := http.NewRequest(http.MethodGet, d.url+"/users/stream", nil)
	req.Header.Set("Authorization", "Bearer t-alice")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
		t.Errorf("transfer encoding %v", resp.TransferEncoding)
	}
	r := bufio.NewReader(resp.Body)
	for i := 1; i <= 3; i++ {
		if i > 1 {
			select { // the service waits for this before writing chunk i
			case h.next <- struct{}{}:
			case <-time.After(10 * time.Second):
				t.Fatal("the service did not ask for the next chunk")
			}
		}
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("chunk %d from user-gray\n", i); line != want {
			t.Fatalf("got %q, want %q", line, want)
		}
	}
}

// TestUpgradePassesThrough switches protocols through the gateway: the
// 101 reaches the client, then bytes flow both ways to the instance the
// gray decision picked.
func TestUpgradePassesThrough(t *testing.T) {
	d := newDemo(t, 0, nil)
	for _, c := range []struct{ token, want string }{{"t-alice", "user-gray"}, {"t-bob", "user-prod"}} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(d.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(conn, "GET /users/ws HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade\r\nUpgrade: echo\r\nAuthorization: Bearer %s\r\n\r\n", c.token)
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusSwitchingProtocols || !strings.EqualFold(resp.Header.Get("Upgrade"), "echo") {
			t.Fatalf("%s: %s %v", c.token, resp.Status, resp.Header)
		}
		for _, msg := range []string{"hello", "again"} {
			fmt.Fprintf(conn, "%s\n", msg)
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if want := c.want + " echo: " + msg + "\n"; line != want {
				t.Fatalf("got %q, want %q", line, want)
			}
		}
		conn.Close()
	}
}

func TestDebugPageForTrustedCallersOnly(t *testing.T) {
	d := newDemo(t, 0, nil)
	get(t, d, "/users/1", "Authorization", "Bearer t-alice")
	if status, _ := get(t, d, "/debug/graylb", "Authorization", "Bearer t-bob"); status != http.StatusForbidden {
		t.Errorf("bob: %d", status)
	}
	status, body := get(t, d, "/debug/graylb?format=json", "Authorization", "Bearer t-qa")
	if status != http.StatusOK || !strings.Contains(body, `"service": "user-service"`) || !strings.Contains(body, `"alice"`) {
		t.Errorf("qa: %d %s", status, body)
	}
}

// TestAnonymousCallersStayProd: the canary draws authenticated users
// (sticky by user id); a caller without a user id is prod, as the hint
// and the README say, on every hop.
func TestAnonymousCallersStayProd(t *testing.T) {
	d := newDemo(t, 50, nil)
	gray := 0
	for i := 0; i < 200; i++ {
		if _, body := get(t, d, "/users/1"); body != "user-prod > order-prod[uid=]" {
			gray++
			if gray == 1 {
				t.Errorf("anonymous request %d: %q", i, body)
			}
		}
	}
	if gray > 0 {
		t.Errorf("%d of 200 anonymous requests left prod under a 50%% canary", gray)
	}
	// The canary still draws authenticated users.
	drawn := 0
	for u := 0; u < 40; u++ {
		if _, body := get(t, d, "/users/1", "Authorization", fmt.Sprintf("Bearer t-user%d", u)); strings.HasPrefix(body, "user-gray > order-gray") {
			drawn++
		}
	}
	if drawn == 0 || drawn == 40 {
		t.Errorf("a 50%% canary drew %d of 40 authenticated users", drawn)
	}
}

// TestDebugPageAndMetrics: the debug page counts picks (its picks table)
// and /metrics serves them in the Prometheus text format, both for
// trusted callers only.
func TestDebugPageAndMetrics(t *testing.T) {
	d := newDemo(t, 0, nil)
	get(t, d, "/users/1", "Authorization", "Bearer t-alice")
	get(t, d, "/users/1", "Authorization", "Bearer t-bob")
	status, body := get(t, d, "/debug/graylb?format=json", "Authorization", "Bearer t-qa")
	if status != http.StatusOK || !strings.Contains(body, `"picks"`) || !strings.Contains(body, `"selected": 1`) {
		t.Errorf("debug page without the picks: %d %s", status, body)
	}
	if status, _ := get(t, d, "/metrics", "Authorization", "Bearer t-bob"); status != http.StatusForbidden {
		t.Errorf("/metrics for bob: %d", status)
	}
	status, body = get(t, d, "/metrics", "Authorization", "Bearer t-qa")
	if status != http.StatusOK {
		t.Fatalf("/metrics for qa: %d %s", status, body)
	}
	for _, want := range []string{
		`graylb_picks_total{graylb_kind="gray",graylb_outcome="selected",graylb_service="user-service"`,
		`graylb_picks_total{graylb_kind="prod",graylb_outcome="selected",graylb_service="user-service"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics without %s:\n%s", want, body)
		}
	}
}
