package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/graylb/graylb/nacos"
)

// Consumer instances registered in Nacos with the metadata kafkagray's
// Link.Metadata gives (keys written out here: the command does not depend
// on Kafka) are listed under their group by kind; rules closed in Nacos
// warn that the gray consumers get no partition.
func TestIntegration_StatusConsumerGroups(t *testing.T) {
	integration(t)
	addr := nacosAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	group := fmt.Sprintf("graylb-consumers-%d", time.Now().UnixNano())
	opts := []nacos.Option{nacos.WithServers(addr), nacos.WithGroup(group),
		nacos.WithCacheDir(t.TempDir()), nacos.WithLogDir(t.TempDir())}
	const svc = "billing"
	for i, c := range []struct {
		gray bool
		md   map[string]string
	}{
		{false, map[string]string{"kafka.group": "billing", "kafka.topics": "orders,payments", "kafka.kind": "prod", "kafka.grayPartitions": "1"}},
		{false, map[string]string{"kafka.group": "billing", "kafka.topics": "orders,payments", "kafka.kind": "prod", "kafka.grayPartitions": "1"}},
		{true, map[string]string{"kafka.group": "billing", "kafka.topics": "orders,payments", "kafka.kind": "gray", "kafka.grayPartitions": "1"}},
		{false, nil}, // serves calls, consumes nothing
	} {
		gray := c.gray
		r, err := nacos.Register(ctx, nacos.Service{Name: svc, Host: "127.0.0.1", Port: 9100 + i, Gray: &gray, Metadata: c.md}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
	}
	g := []string{"--nacos", addr, "--group", group}
	var out string
	eventually(t, 20*time.Second, "status lists the 4 instances", func() bool {
		var code int
		code, out, _ = runCLI(t, nil, append([]string{"status", svc}, g...)...)
		return code == exitOK && strings.Contains(out, "3 prod, 1 gray routable")
	})
	t.Logf("graylb status %s:\n%s", svc, out)
	if !regexp.MustCompile(`billing\s+orders,payments\s+2\s+1\s+0\s+1\n`).MatchString(out) || strings.Contains(out, "consumer group \"billing\"") {
		t.Fatalf("status:\n%s", out)
	}
	if code, out, errOut := runCLI(t, nil, append([]string{"rollback"}, g...)...); code != exitOK {
		t.Fatalf("rollback: exit %d: %s%s", code, out, errOut)
	}
	code, out, errOut := runCLI(t, nil, append([]string{"status", svc, "-o", "json"}, g...)...)
	if code != exitOK || !strings.Contains(out, `consumer group \"billing\": the rules are closed: its 1 gray consumer(s) get no partition`) ||
		!strings.Contains(out, `"group": "billing"`) {
		t.Fatalf("closed: exit %d:\n%s%s", code, out, errOut)
	}
}
