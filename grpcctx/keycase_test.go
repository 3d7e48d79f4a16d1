package grpcctx

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
)

// Key names are case-insensitive over gRPC: a match rule's key in any
// letter case matches the metadata key in any other, on the outgoing call,
// on the incoming one the server interceptors kept, and as a WithValue set
// by the program.
func TestKeyNames_MetadataInAnyCase(t *testing.T) {
	spellings := []string{"X-Region", "x-region", "X-REGION", "x-Region"}
	reg := graylb.NewRegistry()
	serve(t, reg, "b", &testServer{name: "B-prod"}, nil)
	serve(t, reg, "b", &testServer{name: "B-gray"}, map[string]string{"gray": "true"})
	for i, ruleKey := range spellings {
		rules := graylb.WithRules(graylb.Rules{Matches: []graylb.Match{{Key: ruleKey, Exact: "hz", Gray: true}}})
		lb, b := dialLB(t, reg, "b", rules)
		a := "a-" + strconv.Itoa(i)
		serveWith(t, reg, a, &testServer{name: "A", next: b}, nil, ServerOptions(lb))
		edge := dial(t, reg, a)
		call := func(c testgrpc.TestServiceClient, ctx context.Context) string {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			r, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
			require.NoError(t, err)
			return r.GetServerId()
		}
		for _, name := range spellings {
			out := metadata.AppendToOutgoingContext(context.Background(), name, "hz") // gRPC sends keys in lower case
			assert.Equal(t, "B-gray", call(b, out), "rule %q, outgoing %q", ruleKey, name)
			assert.Equal(t, "B-gray", call(b, graylb.WithValue(context.Background(), name, "hz")), "rule %q, WithValue %q", ruleKey, name)
			assert.Equal(t, "A>B-gray", call(edge, out), "rule %q, incoming %q", ruleKey, name)
		}
	}
}
