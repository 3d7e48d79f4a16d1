package graylbkratos_test

import (
	"context"
	"strings"
	"testing"

	"github.com/go-kratos/kratos/v2/registry"
	"github.com/go-kratos/kratos/v2/selector"
	"github.com/graylb/graylb"
)

// FuzzSelectorNodes hands the Selector nodes as a broken or hostile
// registry could: any address, any gray and version metadata, any weight,
// repeated. Apply and Select never panic, and a call that is not gray (no
// header, or any value graylb does not read as gray) never gets a gray
// node.
func FuzzSelectorNodes(f *testing.F) {
	f.Add("127.0.0.1:9000\x00true\x00v1\x00100\n127.0.0.1:9001\x00false\x00v2\x00", "true")
	f.Add("[::1]:80\x00TRUE\x00\x00-5\n[::1]:80\x00\x00\x00NaN\n10.0.0.1\x00true\x00\x00", "")
	f.Add("host:0\x00 true\x00\x00\n:80\x00true\x00\x001e400\nh:65536\x00true\x00\x00", "TRUE")
	f.Add("user-service\x00true\x00\x00\n127.0.0.1:80\x00yes\x00\x00+Inf", "false")
	f.Fuzz(func(t *testing.T, list, grayValue string) {
		var nodes []selector.Node
		for i, line := range strings.Split(list, "\n") {
			if i == 64 {
				break
			}
			fields := strings.Split(line, "\x00")
			for len(fields) < 4 {
				fields = append(fields, "")
			}
			md := map[string]string{"gray": fields[1], "weight": fields[3]}
			nodes = append(nodes, selector.NewNode("grpc", fields[0], &registry.ServiceInstance{
				Name: "svc", Version: fields[2], Metadata: md}))
		}
		lb := newLB(t, graylb.NewRegistry(), graylb.Rules{})
		s := newSelector(t, lb)
		s.Apply(nodes)
		for i := 0; i < 4; i++ {
			n, done, err := s.Select(callCtx(header{}))
			if err == nil {
				if isGrayNode(n) {
					t.Fatalf("a prod call got gray node %s among %d nodes", n.Address(), len(nodes))
				}
				done(context.Background(), selector.DoneInfo{})
			}
			n, done, err = s.Select(callCtx(header{"gray": grayValue}))
			if err == nil {
				if !graylb.IsGray(grayValue) && isGrayNode(n) {
					t.Fatalf("a call with gray=%q got gray node %s", grayValue, n.Address())
				}
				done(context.Background(), selector.DoneInfo{Err: context.Canceled})
			}
		}
	})
}
