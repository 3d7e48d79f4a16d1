package main

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/graylb/graylb/nacos"
)

// startedHosts is the instance list of a prod and a gray instance whose
// processes started at prod and gray (nacos.MetadataStarted).
func startedHosts(prod, gray string) string {
	return fmt.Sprintf(`{"hosts":[{"ip":"127.0.0.1","port":9001,"weight":1,"healthy":true,"enabled":true,"metadata":{%q:%q}},
 {"ip":"127.0.0.1","port":9002,"weight":1,"healthy":true,"enabled":true,"metadata":{"gray":"true",%q:%q}}]}`,
		nacos.MetadataStarted, prod, nacos.MetadataStarted, gray)
}

// onlyProdStarted is the instance list of startedHosts' prod instance
// alone.
func onlyProdStarted(prod string) string {
	return fmt.Sprintf(`{"hosts":[{"ip":"127.0.0.1","port":9001,"weight":1,"healthy":true,"enabled":true,"metadata":{%q:%q}}]}`,
		nacos.MetadataStarted, prod)
}

// A gray build that crash-loops and is started again on its port at once
// fails no request its users see (the Transport sends the GETs a crash
// cuts off to prod) and only a few calls: badbuildtest's crash loop passed.
// The registry shows it: the address leaves the registry and comes back,
// and each start registers a new start time (nacos.MetadataStarted) on it.
// The rollout reads the instances at every check (and between them) and
// rolls back a gray build that restarted --restart-limit times since the
// rollout began while prod did not; when prod restarts too, something else
// is wrong, and it says so instead.
func TestRolloutCountsRestarts(t *testing.T) {
	for _, tc := range []struct {
		name string
		// at the check of that number (from 1), the processes that start
		// anew: "gray", "prod" or "both"
		restarts map[int64]string
		more     []string
		code     int
		says     []string
	}{
		{name: "gray restarts twice", restarts: map[int64]string{2: "gray", 4: "gray"}, code: exitRollback,
			says: []string{"gray instance 127.0.0.1:9002 restarted (graylb.started g1, then g2); restarts since the rollout began: gray 1, prod 0",
				"rolled back at canary ", "the gray build restarted 2 times since the rollout began (127.0.0.1:9002: 2), prod's 1 instances none: its instances left the registry and came back on their addresses, or came back with a new graylb.started (--restart-limit 2)"}},
		// A registry that keeps a removed instance's metadata for a while
		// (r-nacos lists the first process's graylb.started on an address
		// re-registered within about a minute): the restart shows as the
		// address gone from a read and back at a later one.
		{name: "gray leaves the registry and comes back, twice", restarts: map[int64]string{2: "gray gone", 3: "gray back", 5: "gray gone", 6: "gray back"}, code: exitRollback,
			says: []string{"gray instance 127.0.0.1:9002 restarted (it left the registry and came back); restarts since the rollout began: gray 1, prod 0",
				"the gray build restarted 2 times since the rollout began (127.0.0.1:9002: 2)"}},
		{name: "gray restarts once", restarts: map[int64]string{2: "gray"}, code: exitOK, more: []string{"-o", "json"},
			says: []string{`"outcome": "healthy"`, `"restarts": {`, `"gray": 1,`}},
		{name: "prod restarts too", restarts: map[int64]string{2: "both", 4: "both"}, code: exitOK,
			says: []string{"gray's instances restarted 2 times and prod's 2 since the rollout began", "instances of both builds restart"}},
		{name: "restarts not judged", restarts: map[int64]string{2: "gray", 4: "gray"}, more: []string{"--restart-limit", "0"}, code: exitOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeNacos(t)
			f.register("svc", startedHosts("p1", "g1"))
			var checks atomic.Int64
			var prodAt, grayAt atomic.Int64 // the processes' starts so far
			prom := fakePromAll(t, func(q string) string {
				if isFallBackQuery(q) {
					if strings.Contains(q, defaultPicksMetric) { // once a check, after its read of the registry
						hosts := ""
						switch tc.restarts[checks.Add(1)] {
						case "gray":
							grayAt.Add(1)
						case "prod":
							prodAt.Add(1)
						case "both":
							prodAt.Add(1)
							grayAt.Add(1)
						case "gray gone":
							hosts = onlyProdStarted(fmt.Sprintf("p%d", prodAt.Load()+1))
						case "gray back": // with the start time it had
						default:
							return vector()
						}
						if hosts == "" {
							hosts = startedHosts(fmt.Sprintf("p%d", prodAt.Load()+1), fmt.Sprintf("g%d", grayAt.Load()+1))
						}
						f.register("svc", hosts)
					}
					return vector()
				}
				return trafficAnswer(q, traffic{"svc", 500, 0.002, 5000, 0.001})
			})
			code, out, errOut := runCLI(t, nil, rolloutArgs(f, prom.URL, tc.more...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d:\n%s%s", code, tc.code, out, errOut)
			}
			for _, s := range tc.says {
				if !strings.Contains(out+errOut, s) {
					t.Errorf("the output lacks %q:\n%s%s", s, out, errOut)
				}
			}
		})
	}
}
