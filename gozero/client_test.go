package gozero_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/gozero"
	"github.com/graylb/graylb/grpcctx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zeromicro/go-zero/core/discov"
	"github.com/zeromicro/go-zero/zrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// svc starts a prod and a gray zrpc instance of "svc" in a new registry
// and returns the registry and a LoadBalancer over it.
func svc(t *testing.T, kinds ...bool) (*graylb.Registry, *graylb.LoadBalancer) {
	t.Helper()
	reg := graylb.NewRegistry()
	for _, gray := range kinds {
		zrpcServer(t, reg, "svc", gray, &named{name: kindName(gray)}, nil)
	}
	lb, err := graylb.New(reg)
	require.NoError(t, err)
	t.Cleanup(func() { lb.Close() })
	return reg, lb
}

// calls makes n calls with ctx and counts the instances that answered.
func calls(t *testing.T, c testgrpc.TestServiceClient, ctx context.Context, n int) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for i := 0; i < n; i++ {
		r, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		require.NoError(t, err)
		counts[r.GetServerId()]++
	}
	return counts
}

// zrpc's default configuration selects its p2c balancer through a default
// service config; the options of ClientOptions come after it, so graylb's
// balancer picks: prod calls never reach the gray instance.
func TestClientPicksWithGraylbOverZrpcP2C(t *testing.T) {
	_, lb := svc(t, false, true)
	c := zrpcClient(t, lb, "svc")
	assert.Equal(t, map[string]int{"prod": 300}, calls(t, c, context.Background(), 300), "prod calls")
	gray := metadata.AppendToOutgoingContext(context.Background(), "gray", "true")
	assert.Equal(t, map[string]int{"gray": 100}, calls(t, c, gray, 100), "gray calls")
}

// The control: the same client with graylb's resolver alone (zrpc's p2c
// picks among the addresses) sends prod calls to the gray instance, which
// is what the test above rules out.
func TestClientWithoutGraylbBalancerMixes(t *testing.T) {
	_, lb := svc(t, false, true)
	cli, err := zrpc.NewClient(clientConf(t, gozero.Target("svc")),
		zrpc.WithDialOption(grpc.WithResolvers(grpcctx.NewResolverBuilder(lb))))
	require.NoError(t, err)
	t.Cleanup(func() { cli.Conn().Close() })
	counts := calls(t, testgrpc.NewTestServiceClient(cli.Conn()), context.Background(), 300)
	assert.Positive(t, counts["gray"], "zrpc's p2c sends prod calls to gray instances: %v", counts)
}

// A user's round robin service config given after ClientOptions (zrpc
// applies dial options in order, and of several default service configs
// the last counts) would balance graylb's addresses with round robin and
// send about half of the prod calls to gray: it is refused, and no prod
// call reaches gray.
func TestClientRefusesALaterServiceConfigOfAnotherBalancer(t *testing.T) {
	_, lb := svc(t, false, true)
	rr := zrpc.WithDialOption(grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`))
	cli, err := zrpc.NewClient(clientConf(t, gozero.Target("svc")), append(gozero.ClientOptions(lb), rr)...)
	wants := []string{"grpcctx:", "after grpcctx.DialOptions", "zrpc.WithDialOption", `"graylb"`}
	if err != nil {
		for _, want := range wants {
			assert.Contains(t, err.Error(), want)
		}
		return
	}
	t.Cleanup(func() { cli.Conn().Close() })
	c := testgrpc.NewTestServiceClient(cli.Conn())
	answered := map[string]int{}
	var first error // later ones may be go-zero's breaker's, open after so many failures
	for i := 0; i < 200; i++ {
		r, err := c.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		answered[r.GetServerId()]++
	}
	require.Zero(t, answered["gray"], "prod calls of 200 that reached gray (answers: %v)", answered)
	require.Empty(t, answered, "calls balanced by round robin")
	assert.Equal(t, codes.Unavailable, status.Code(first), "%v", first)
	for _, want := range wants {
		assert.Contains(t, status.Convert(first).Message(), want)
	}
}

// A prod call of a service that has only gray instances fails with
// graylb's error (the gray rule), not with a pick of zrpc's balancer.
func TestClientNoProdInstance(t *testing.T) {
	_, lb := svc(t, true)
	c := zrpcClient(t, lb, "svc")
	_, err := c.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	require.Error(t, err)
	assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	assert.Contains(t, err.Error(), graylb.ErrNoInstance.Error())
	gray := metadata.AppendToOutgoingContext(context.Background(), "gray", "true")
	assert.Equal(t, map[string]int{"gray": 10}, calls(t, c, gray, 10))
}

// The client follows the registry: a gray instance that joins serves gray
// calls, prod calls stay on prod.
func TestClientFollowsRegistry(t *testing.T) {
	reg, lb := svc(t, false)
	c := zrpcClient(t, lb, "svc")
	gray := metadata.AppendToOutgoingContext(context.Background(), "gray", "true")
	assert.Equal(t, map[string]int{"prod": 10}, calls(t, c, gray, 10), "gray calls fall back to prod while there is no gray instance")
	zrpcServer(t, reg, "svc", true, &named{name: "gray"}, nil)
	require.Eventually(t, func() bool {
		r, err := c.UnaryCall(gray, &testgrpc.SimpleRequest{})
		return err == nil && r.GetServerId() == "gray"
	}, 10*time.Second, 10*time.Millisecond, "a gray instance that registered serves gray calls")
	assert.Equal(t, map[string]int{"prod": 100}, calls(t, c, context.Background(), 100))
}

func TestNewClientRefusesOtherTargets(t *testing.T) {
	_, lb := svc(t)
	for name, c := range map[string]zrpc.RpcClientConf{
		"endpoints":       {Endpoints: []string{"127.0.0.1:1"}, Target: gozero.Target("svc")},
		"etcd":            {Etcd: discov.EtcdConf{Hosts: []string{"127.0.0.1:2379"}, Key: "svc"}},
		"empty target":    {},
		"direct":          {Target: "direct:///127.0.0.1:1"},
		"etcd target":     {Target: "etcd://127.0.0.1:2379/svc"},
		"k8s":             {Target: "k8s://ns/svc:8080"},
		"two slashes":     {Target: "graylb://svc"},
		"scheme case":     {Target: "GRAYLB:///svc"},
		"leading space":   {Target: " graylb:///svc"},
		"graylb no slash": {Target: "graylb:svc"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := gozero.NewClient(lb, c)
			assert.ErrorIs(t, err, gozero.ErrNotGraylbTarget)
		})
	}
	_, err := gozero.NewClient(nil, zrpc.RpcClientConf{Target: gozero.Target("svc")})
	assert.Error(t, err, "nil LoadBalancer")
	for _, target := range []string{"graylb:///", "graylb:///" + strings.Repeat("s", 10000), "graylb:///a b"} {
		c := clientConf(t, target)
		c.NonBlock = true
		cli, err := gozero.NewClient(lb, c)
		if err == nil {
			// grpc-go builds the resolver on the first call: the call fails.
			_, err = testgrpc.NewTestServiceClient(cli.Conn()).UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
			cli.Conn().Close()
		}
		assert.Error(t, err, "target %.40q", target)
		assert.False(t, errors.Is(err, gozero.ErrNotGraylbTarget), "a graylb target is not refused for its scheme: %v", err)
	}
}

// Nil inputs: no panic, a clear error or a call that fails.
func TestNilInputs(t *testing.T) {
	_, lb := svc(t, false)
	assert.NotPanics(t, func() { gozero.AddServerInterceptors(nil, lb) })
	c := clientConf(t, gozero.Target("svc"))
	c.NonBlock = true
	cli, err := zrpc.NewClient(c, gozero.ClientOptions(nil)...)
	if err == nil {
		defer cli.Conn().Close()
		_, err = testgrpc.NewTestServiceClient(cli.Conn()).UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	}
	assert.ErrorContains(t, err, "no LoadBalancer")
}

// A service config the caller gives NewClient (a retry policy that selects
// graylb's balancer) applies: graylb's options come before the caller's,
// so the caller's is the last and counts (one selecting another balancer
// is refused, TestClientRefusesALaterServiceConfigOfAnotherBalancer).
func TestNewClientKeepsTheCallersRetryPolicy(t *testing.T) {
	reg := graylb.NewRegistry()
	var attempts atomic.Int64
	zrpcServer(t, reg, "user-rpc", false, &named{name: "user-prod", next: func(context.Context) (string, error) {
		if attempts.Add(1) <= 2 {
			return "", status.Error(codes.Unavailable, "not yet")
		}
		return "ok", nil
	}}, nil)
	lb, err := graylb.New(reg)
	require.NoError(t, err)
	defer lb.Close()
	retry := `{"loadBalancingConfig":[{"graylb":{}}],"methodConfig":[{"name":[{}],` +
		`"retryPolicy":{"maxAttempts":3,"initialBackoff":"0.05s","maxBackoff":"0.5s","backoffMultiplier":2,` +
		`"retryableStatusCodes":["UNAVAILABLE"]}}]}`
	c, err := gozero.NewClient(lb, clientConf(t, gozero.Target("user-rpc")), zrpc.WithDialOption(grpc.WithDefaultServiceConfig(retry)))
	require.NoError(t, err)
	defer c.Conn().Close()
	r, err := testgrpc.NewTestServiceClient(c.Conn()).UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	require.NoError(t, err, "the caller's retry policy retries UNAVAILABLE")
	assert.Equal(t, "user-prod,ok", r.GetServerId())
	assert.EqualValues(t, 3, attempts.Load())
}

// The caller's interceptors given to NewClient run outside graylb's, as
// zrpc's own do: one that replaces the call's outgoing metadata does not
// drop the keys graylb writes for the next hop (the kind a rule decided).
func TestNewClientCallersInterceptorsRunOutsideGraylbs(t *testing.T) {
	reg := graylb.NewRegistry()
	for _, gray := range []bool{false, true} {
		zrpcServer(t, reg, "svc", gray, &named{name: kindName(gray), next: func(ctx context.Context) (string, error) {
			md, _ := metadata.FromIncomingContext(ctx)
			return strings.Join(md.Get("gray"), "|") + ";" + strings.Join(md.Get("x-own"), "|"), nil
		}}, nil)
	}
	lb, err := graylb.New(reg, graylb.WithRules(graylb.Rules{GrayUsers: []string{"alice"}}))
	require.NoError(t, err)
	defer lb.Close()
	replace := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(metadata.NewOutgoingContext(ctx, metadata.Pairs("x-own", "1")), method, req, reply, cc, opts...)
	}
	c, err := gozero.NewClient(lb, clientConf(t, gozero.Target("svc")), zrpc.WithUnaryClientInterceptor(replace))
	require.NoError(t, err)
	defer c.Conn().Close()
	ctx := graylb.WithValue(context.Background(), "uid", "alice") // a gray user: graylb writes gray: true
	r, err := testgrpc.NewTestServiceClient(c.Conn()).UnaryCall(ctx, &testgrpc.SimpleRequest{})
	require.NoError(t, err)
	assert.Equal(t, "gray,true;1", r.GetServerId())
}
