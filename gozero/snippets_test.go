package gozero_test

// The Go snippets of docs/go-zero.md are the regions of this file (the docs
// module, which checks that the page shows them byte for byte, does not
// depend on go-zero): each test runs its snippets against go-zero servers
// and checks what they did.

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/gozero"
	"github.com/graylb/graylb/httpctx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zeromicro/go-zero/rest"
	"github.com/zeromicro/go-zero/zrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// A go-zero service's configuration, as goctl generates it.
type Config struct {
	zrpc.RpcServerConf
	UserRpc zrpc.RpcClientConf
}

// The client and the server snippets in one service (svc-a) that calls
// user-rpc: a gray call to svc-a goes gray on both hops, a prod one stays
// on prod.
func TestDocsZrpc(t *testing.T) {
	reg := graylb.NewRegistry()
	for _, gray := range []bool{false, true} {
		zrpcServer(t, reg, "user-rpc", gray, &named{name: "user-" + kindName(gray)}, nil)
	}
	lb, err := graylb.New(reg)
	require.NoError(t, err)
	defer lb.Close()
	var c Config
	c.RpcServerConf = serverConf(t, "svc-a", "127.0.0.1:"+strconv.Itoa(freePort(t)))
	c.UserRpc = clientConf(t, "etcd://127.0.0.1:2379/user.rpc")

	// snippet: gozero-client
	// Was: Etcd (discov://), Endpoints (direct://) or a k8s:// Target.
	// In the YAML: UserRpc: {Target: graylb:///user-rpc}
	c.UserRpc.Target = gozero.Target("user-rpc")
	userRpc := zrpc.MustNewClient(c.UserRpc, gozero.ClientOptions(lb)...)
	// end snippet
	defer userRpc.Conn().Close()
	users := testgrpc.NewTestServiceClient(userRpc.Conn())
	srv := &named{name: "a", next: func(ctx context.Context) (string, error) {
		r, err := users.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		return r.GetServerId(), err
	}}

	// snippet: gozero-server
	s := zrpc.MustNewServer(c.RpcServerConf, func(grpcServer *grpc.Server) {
		testgrpc.RegisterTestServiceServer(grpcServer, srv)
	})
	gozero.AddServerInterceptors(s, lb) // before s.Start()
	// end snippet
	done := start(t, c.ListenOn, s.Start)
	t.Cleanup(func() { stopAll(t, done) })

	conn, err := grpc.NewClient(c.ListenOn, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	a := testgrpc.NewTestServiceClient(conn)
	for v, want := range map[string]string{"true": "a,user-gray", "false": "a,user-prod", "": "a,user-prod"} {
		for i := 0; i < 10; i++ {
			r, err := a.UnaryCall(metadata.AppendToOutgoingContext(context.Background(), "gray", v), &testgrpc.SimpleRequest{})
			require.NoError(t, err)
			assert.Equal(t, want, r.GetServerId(), "gray: %q", v)
		}
	}
}

// A retry policy of the program's own, after ClientOptions and selecting
// graylb: the calls are retried, and graylb's balancer picks (prod calls
// stay on prod).
func TestDocsRetry(t *testing.T) {
	reg := graylb.NewRegistry()
	var attempts atomic.Int64
	zrpcServer(t, reg, "user-rpc", false, &named{name: "user-prod", next: func(context.Context) (string, error) {
		if attempts.Add(1) <= 2 {
			return "", status.Error(codes.Unavailable, "not yet")
		}
		return "ok", nil
	}}, nil)
	zrpcServer(t, reg, "user-rpc", true, &named{name: "user-gray"}, nil)
	lb, err := graylb.New(reg)
	require.NoError(t, err)
	defer lb.Close()
	var c Config
	c.UserRpc = clientConf(t, gozero.Target("user-rpc"))

	// snippet: gozero-retry
	retry := `{"loadBalancingConfig":[{"graylb":{}}],"methodConfig":[{"name":[{}],` +
		`"retryPolicy":{"maxAttempts":3,"initialBackoff":"0.1s","maxBackoff":"1s","backoffMultiplier":2,` +
		`"retryableStatusCodes":["UNAVAILABLE"]}}]}`
	userRpc := zrpc.MustNewClient(c.UserRpc, append(gozero.ClientOptions(lb),
		zrpc.WithDialOption(grpc.WithDefaultServiceConfig(retry)))...)
	// end snippet
	defer userRpc.Conn().Close()
	users := testgrpc.NewTestServiceClient(userRpc.Conn())
	r, err := users.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	require.NoError(t, err, "retried twice")
	assert.Equal(t, "user-prod,ok", r.GetServerId())
	assert.EqualValues(t, 3, attempts.Load())
	for i := 0; i < 50; i++ {
		r, err := users.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		require.NoError(t, err)
		require.Equal(t, "user-prod,ok", r.GetServerId())
	}
}

// The rest snippets: an internal rest service and a public edge, each
// calling user-rpc with the request's context.
func TestDocsRest(t *testing.T) {
	reg := graylb.NewRegistry()
	for _, gray := range []bool{false, true} {
		zrpcServer(t, reg, "user-rpc", gray, &named{name: "user-" + kindName(gray)}, nil)
	}
	lb, err := graylb.New(reg, graylb.WithRules(graylb.Rules{GrayUsers: []string{"alice"}}))
	require.NoError(t, err)
	defer lb.Close()
	users := zrpcClient(t, lb, "user-rpc")
	handler := func(w http.ResponseWriter, r *http.Request) {
		resp, err := users.UnaryCall(r.Context(), &testgrpc.SimpleRequest{})
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.Write([]byte(resp.GetServerId()))
	}
	isInternal := func(r *http.Request) bool {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		return r.Header.Get("X-Internal-Token") == "s3cret" && net.ParseIP(host).IsLoopback()
	}
	authenticatedUser := func(r *http.Request) string { return r.Header.Get("X-Verified-User") }

	internal := restServer(t, func(server *rest.Server) {
		// snippet: gozero-rest
		server.Use(gozero.Middleware(lb))
		// end snippet
		server.AddRoute(rest.Route{Method: http.MethodGet, Path: "/user", Handler: handler})
	})
	edge := restServer(t, func(server *rest.Server) {
		// snippet: gozero-edge
		// A public edge: no routing header of an untrusted caller counts;
		// the user id (for gray-user rules) comes from your auth.
		server.Use(gozero.Middleware(lb, httpctx.WithTrusted(isInternal), httpctx.WithUser(authenticatedUser)))
		// end snippet
		server.AddRoute(rest.Route{Method: http.MethodGet, Path: "/user", Handler: handler})
	})

	client := &http.Client{}
	defer client.CloseIdleConnections()
	for _, tc := range []struct {
		url, want string
		hdr       []string
	}{
		{internal, "user-gray", []string{"gray", "true"}},
		{internal, "user-prod", nil},
		{internal, "user-gray", []string{"uid", "alice"}},
		{edge, "user-prod", []string{"gray", "true"}},
		{edge, "user-prod", []string{"uid", "alice"}},
		{edge, "user-gray", []string{"X-Verified-User", "alice"}},
		{edge, "user-gray", []string{"X-Internal-Token", "s3cret", "gray", "true"}},
	} {
		body, err := get(client, tc.url+"/user", tc.hdr...)
		require.NoError(t, err)
		assert.Equal(t, tc.want, body, "%s %q", tc.url, tc.hdr)
	}
}

// The README's go-zero lines: a rest server → a zrpc server (svc-a) →
// user-rpc, each line of the snippet in its place.
func TestDocsWire(t *testing.T) {
	reg := graylb.NewRegistry()
	for _, gray := range []bool{false, true} {
		zrpcServer(t, reg, "user-rpc", gray, &named{name: "user-" + kindName(gray)}, nil)
	}
	lb, err := graylb.New(reg)
	require.NoError(t, err)
	defer lb.Close()
	var c Config
	c.UserRpc = clientConf(t, "")
	var users, a testgrpc.TestServiceClient
	srv := &named{name: "a", next: func(ctx context.Context) (string, error) {
		r, err := users.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		return r.GetServerId(), err
	}}
	edge := restServer(t, func(restServer *rest.Server) {
		zrpcServer(t, reg, "svc-a", false, srv, func(rpcServer *zrpc.RpcServer) {
			// snippet: gozero-wire
			// A zrpc client (svc/servicecontext.go): the target through graylb, and graylb's options.
			c.UserRpc.Target = gozero.Target("user-rpc") // graylb:///user-rpc
			userRpc := zrpc.MustNewClient(c.UserRpc, gozero.ClientOptions(lb)...)

			// A zrpc server and a rest server keep each request's kind for the calls they make.
			gozero.AddServerInterceptors(rpcServer, lb)
			restServer.Use(gozero.Middleware(lb))
			// end snippet
			t.Cleanup(func() { userRpc.Conn().Close() })
			users = testgrpc.NewTestServiceClient(userRpc.Conn())
		})
		a = zrpcClient(t, lb, "svc-a")
		restServer.AddRoute(rest.Route{Method: http.MethodGet, Path: "/", Handler: func(w http.ResponseWriter, r *http.Request) {
			resp, err := a.UnaryCall(r.Context(), &testgrpc.SimpleRequest{})
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			w.Write([]byte(resp.GetServerId()))
		}})
	})
	client := &http.Client{}
	defer client.CloseIdleConnections()
	for v, want := range map[string]string{"true": "a,user-gray", "false": "a,user-prod", "": "a,user-prod"} {
		body, err := get(client, edge+"/", "gray", v)
		require.NoError(t, err)
		assert.Equal(t, want, body, "gray: %q", v)
	}
}
