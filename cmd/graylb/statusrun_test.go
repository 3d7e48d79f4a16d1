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

// --help prints the usage once, on standard output, for every command; a
// flag error prints it once, on standard error.
func TestHelpPrintedOnce(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"canary", "--help"}, {"rules", "get", "-h"}, {"rollout", "--help"}, {"status", "-h"}} {
		code, out, errOut := runCLI(t, nil, args...)
		if code != exitOK || strings.Count(out, "Usage:") != 1 || errOut != "" {
			t.Errorf("%v: exit %d, %d usages on stdout, stderr %q", args, code, strings.Count(out, "Usage:"), errOut)
		}
	}
	code, out, errOut := runCLI(t, nil, "canary", "5", "--no-such-flag")
	if code != exitUsage || out != "" || strings.Count(errOut, "Usage:") != 1 || !strings.Contains(errOut, "no-such-flag") {
		t.Errorf("a flag error: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
