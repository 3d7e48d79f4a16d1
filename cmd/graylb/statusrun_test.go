package main

import (
	"encoding/json"
	"reflect"
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

// status lists, per service, the Kafka consumer groups its instances say
// they consume in (kafka.* metadata), by consumer kind, and warns of what
// keeps a group's partitions from their consumers.
func TestStatusConsumerGroups(t *testing.T) {
	f := newFakeNacos(t)
	f.hosts = `{"hosts":[
	 {"ip":"127.0.0.1","port":9001,"weight":1,"healthy":true,"enabled":true,"metadata":{"kafka.group":"orders","kafka.topics":"orders,payments","kafka.kind":"prod","kafka.grayPartitions":"1"}},
	 {"ip":"127.0.0.1","port":9002,"weight":1,"healthy":false,"enabled":true,"metadata":{"kafka.group":"orders","kafka.topics":"orders","kafka.kind":"prod","kafka.grayPartitions":"1"}},
	 {"ip":"127.0.0.1","port":9003,"weight":1,"healthy":true,"enabled":true,"metadata":{"gray":"true","kafka.group":"orders","kafka.topics":"orders,payments","kafka.kind":"gray","kafka.grayPartitions":"2"}},
	 {"ip":"127.0.0.1","port":9004,"weight":0,"healthy":true,"enabled":true,"metadata":{"gray":"true","kafka.group":"audit\u001b[31m","kafka.topics":"audit"}},
	 {"ip":"127.0.0.1","port":9005,"weight":1,"healthy":true,"enabled":true}]}`
	f.set("DEFAULT_GROUP", "graylb-rules.json", `{"grayAddresses": ["127.0.0.1:9001"]}`)
	code, out, errOut := runCLI(t, nil, "status", "svc", "--nacos", f.addr())
	if code != exitOK {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		`CONSUMER GROUP\s+TOPICS\s+PROD\s+GRAY\s+DOWN\s+GRAY PARTITIONS`,
		// 9001 is gray by address for calls, but its consumer kind is its own flag: prod.
		`orders\s+orders,payments\s+2\s+1\s+1\s+1,2`,
		// no kafka.kind: the gray metadata says; registry text escaped.
		`"audit\\x1b\[31m"\s+audit\s+0\s+1\s+0\s+-`,
		`consumer group "orders": its consumers disagree on the number of gray partitions \("1", "2"\)`,
		`consumer group "audit\\x1b\[31m" has gray consumers only: its prod partitions wait`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	t.Logf("graylb status svc:\n%s", out)
	if strings.Contains(out, "rules are closed") {
		t.Errorf("a closed-rules warning with open rules:\n%s", out)
	}

	f.set("DEFAULT_GROUP", "graylb-rules.json", `{"closed": true}`)
	code, out, errOut = runCLI(t, nil, "status", "svc", "--nacos", f.addr(), "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	var rep struct {
		Services []struct {
			Consumers []consumerGroupStatus `json:"consumers"`
			Warnings  []string              `json:"warnings"`
		} `json:"services"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Services) != 1 {
		t.Fatalf("json: %v:\n%s", err, out)
	}
	s := rep.Services[0]
	want := []consumerGroupStatus{
		{Group: "audit\x1b[31m", Topics: []string{"audit"}, Gray: 1, GrayPartitions: []string{}},
		{Group: "orders", Topics: []string{"orders", "payments"}, Prod: 2, Gray: 1, Down: 1, GrayPartitions: []string{"1", "2"}},
	}
	if !reflect.DeepEqual(s.Consumers, want) {
		t.Fatalf("consumers %+v\nwant %+v", s.Consumers, want)
	}
	closed := 0
	for _, w := range s.Warnings {
		if strings.Contains(w, "the rules are closed: its 1 gray consumer(s) get no partition") {
			closed++
		}
	}
	if closed != 2 {
		t.Fatalf("want a closed-rules warning for each group with gray consumers: %q", s.Warnings)
	}

	// A service with no consumer: an empty list, no table.
	f.hosts = `{"hosts":[{"ip":"127.0.0.1","port":9005,"weight":1,"healthy":true,"enabled":true}]}`
	_, out, _ = runCLI(t, nil, "status", "svc", "--nacos", f.addr(), "-o", "json")
	if !strings.Contains(out, `"consumers": []`) {
		t.Fatalf("no consumer:\n%s", out)
	}
	_, out, _ = runCLI(t, nil, "status", "svc", "--nacos", f.addr())
	if strings.Contains(out, "CONSUMER GROUP") {
		t.Fatalf("a consumer table without consumers:\n%s", out)
	}
}
