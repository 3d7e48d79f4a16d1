package grpcctx

import (
	"context"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/filter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
)

// TestMatchRules_LaneAndKindTravel: edge -> A -> B. The edge's rules match
// x-region (gray) and x-lane (a version); A has no rules of its own, yet B
// is routed by the edge's decision: the client interceptor writes the kind
// and the lane.
func TestMatchRules_LaneAndKindTravel(t *testing.T) {
	reg := graylb.NewRegistry()
	serve(t, reg, "b", &testServer{name: "B-prod"}, nil)
	serve(t, reg, "b", &testServer{name: "B-feat"}, map[string]string{"version": "feat-42"})
	serve(t, reg, "b", &testServer{name: "B-gray"}, map[string]string{"gray": "true"})
	versions := graylb.WithFilters(filter.Version())
	for _, kind := range []string{"prod", "gray"} {
		lb, next := dialLB(t, reg, "b", versions)
		serveWith(t, reg, "a", &testServer{name: "A-" + kind, next: next}, map[string]string{"gray": map[string]string{"prod": "false", "gray": "true"}[kind]}, ServerOptions(lb))
	}
	rules := graylb.Rules{Matches: []graylb.Match{
		{Key: "x-region", Exact: "hz", Gray: true},
		{Key: "x-lane", Prefix: "feat-", Version: "feat-42"},
	}}
	edge := dial(t, reg, "a", versions, graylb.WithRules(rules))
	call := func(md ...string) string {
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), md...), 5*time.Second)
		defer cancel()
		r, err := edge.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		require.NoError(t, err)
		return r.GetServerId()
	}
	for range 6 {
		assert.Equal(t, "A-gray>B-gray", call("x-region", "hz"))
		assert.Equal(t, "A-prod>B-feat", call("x-lane", "feat-1"))
		assert.Equal(t, "A-prod>B-prod", call("x-region", "hz", "gray", "false"))
		assert.Equal(t, "A-prod>B-prod", call("x-region", "sh"))
	}
}

// TestMatchRules_UntrustedKeysNeverMatch: a server at a trust boundary
// strips the match keys of the rules in force (any letter case, repeated)
// without being told of them; a trusted call keeps and propagates them.
func TestMatchRules_UntrustedKeysNeverMatch(t *testing.T) {
	reg := graylb.NewRegistry()
	serve(t, reg, "b", &testServer{name: "B-prod"}, nil)
	serve(t, reg, "b", &testServer{name: "B-gray"}, map[string]string{"gray": "true"})
	lb, next := dialLB(t, reg, "b")
	trusted := func(ctx context.Context) bool {
		md, _ := metadata.FromIncomingContext(ctx)
		return len(md.Get("x-internal")) > 0
	}
	addr := serveWith(t, reg, "a", &testServer{name: "A", next: next}, nil, ServerOptions(lb, WithTrusted(trusted)))
	// The rules arrive after the server was built.
	require.NoError(t, lb.SetRules(graylb.Rules{Matches: []graylb.Match{{Key: "X-Region", Exact: "hz", Gray: true}}}))
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	c := testgrpc.NewTestServiceClient(conn)
	call := func(md ...string) string {
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), md...), 5*time.Second)
		defer cancel()
		r, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		require.NoError(t, err)
		return r.GetServerId()
	}
	for range 6 {
		assert.Equal(t, "A>B-prod", call("x-region", "hz"))
		assert.Equal(t, "A>B-prod", call("X-REGION", "hz", "x-region", "hz"))
		assert.Equal(t, "A>B-gray", call("x-internal", "1", "x-region", "hz"))
	}
}
