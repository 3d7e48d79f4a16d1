package main

import (
	"regexp"
	"strings"
	"testing"
)

// status without a service lists the services of the group with their
// instances counted by kind, as kubectl get lists (it was a usage error).
func TestStatusListsServices(t *testing.T) {
	f := newFakeNacos(t)
	f.services = []string{"order-service", "user-service"}
	f.hosts = `{"hosts":[
	 {"ip":"127.0.0.1","port":9001,"weight":1,"healthy":true,"enabled":true},
	 {"ip":"127.0.0.1","port":9002,"weight":1,"healthy":true,"enabled":true},
	 {"ip":"127.0.0.1","port":9003,"weight":1,"healthy":true,"enabled":true,"metadata":{"gray":"true"}},
	 {"ip":"127.0.0.1","port":9004,"weight":1,"healthy":false,"enabled":true}]}`
	code, out, errOut := runCLI(t, nil, "status", "--nacos", f.addr())
	if code != exitOK {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		`SERVICE\s+INSTANCES\s+PROD\s+GRAY\s+NOT ROUTED`,
		`order-service\s+4\s+2\s+1\s+1`,
		`user-service\s+4\s+2\s+1\s+1`,
		`rollout: none running`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = runCLI(t, nil, "status", "--nacos", f.addr(), "-o", "json")
	if code != exitOK || !strings.Contains(out, `"service": "order-service"`) || !strings.Contains(out, `"notRouted": 1`) {
		t.Fatalf("json: exit %d:\n%s", code, out)
	}
}
