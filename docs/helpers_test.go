package docs

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
)

// echo is an HTTP instance that answers its name and the gray header it
// received: "name gray=true".
func echo(t *testing.T, name string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, name+" gray="+r.Header.Get("gray"))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// hostPort splits a listener's address.
func hostPort(t *testing.T, addr string) (string, int) {
	t.Helper()
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return h, port
}

// registerHTTP registers srv as an instance of service with metadata md.
func registerHTTP(t *testing.T, reg *graylb.Registry, service string, srv *httptest.Server, md map[string]string) {
	t.Helper()
	host, port := hostPort(t, srv.Listener.Addr().String())
	if err := reg.Register(graylb.NewInstance(service, host, port, md)); err != nil {
		t.Fatal(err)
	}
}

// httpService is a registry with service's prod and gray instances, each
// an echo named "<service>-prod" / "<service>-gray".
func httpService(t *testing.T, reg *graylb.Registry, service string) {
	t.Helper()
	registerHTTP(t, reg, service, echo(t, service+"-prod"), nil)
	registerHTTP(t, reg, service, echo(t, service+"-gray"), map[string]string{"gray": "true"})
}

// get sends a GET to url with the header pairs and returns the body.
func get(t *testing.T, client *http.Client, url string, header ...string) string {
	t.Helper()
	body, err := tryGet(client, url, header...)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// tryGet is get returning the error.
func tryGet(client *http.Client, url string, header ...string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// named is a gRPC instance that answers its name, after what its next hop
// answered when it has one.
type named struct {
	testgrpc.UnimplementedTestServiceServer
	name string
	next testgrpc.TestServiceClient
}

func (s *named) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	id := s.name
	if s.next != nil {
		r, err := s.next.UnaryCall(ctx, req)
		if err != nil {
			return nil, err
		}
		id += " → " + r.GetServerId()
	}
	return &testgrpc.SimpleResponse{ServerId: id}, nil
}

// serveGRPC starts srv with s registered on a loopback port and returns
// its address.
func serveGRPC(t *testing.T, srv *grpc.Server, s testgrpc.TestServiceServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	testgrpc.RegisterTestServiceServer(srv, s)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// grpcService registers a prod and a gray gRPC instance of service,
// "<service>-prod" and "<service>-gray".
func grpcService(t *testing.T, reg *graylb.Registry, service string) {
	t.Helper()
	for _, kind := range []string{"prod", "gray"} {
		addr := serveGRPC(t, grpc.NewServer(), &named{name: service + "-" + kind})
		host, port := hostPort(t, addr)
		if err := reg.Register(graylb.NewInstance(service, host, port, map[string]string{"gray": map[string]string{"prod": "false", "gray": "true"}[kind]})); err != nil {
			t.Fatal(err)
		}
	}
}

// unary calls c with the metadata pairs, waiting for a READY connection.
func unary(t *testing.T, c testgrpc.TestServiceClient, md ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), md...), 10*time.Second)
	defer cancel()
	r, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatal(err)
	}
	return r.GetServerId()
}

// poll calls cond every tick until it holds or within passes, and reports
// whether it held.
func poll(within, tick time.Duration, cond func() bool) bool {
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for deadline := time.After(within); !cond(); {
		select {
		case <-ticker.C:
		case <-deadline:
			return cond()
		}
	}
	return true
}
