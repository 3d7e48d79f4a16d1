package docs

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/grpcctx"
	"github.com/graylb/graylb/httpctx"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
)

// README.md, A first look: HTTP.
func TestFirstLookHTTP(t *testing.T) {
	reg := graylb.NewRegistry()
	httpService(t, reg, "user-service")

	// snippet: first-look-http
	lb, err := graylb.New(reg) // reg: graylb.NewRegistry(), or a Nacos supplier
	if err != nil {
		log.Fatal(err)
	}
	defer lb.Close()
	client := &http.Client{Transport: httpctx.NewTransport(lb)}

	// A service's handler: the Middleware keeps the incoming gray header,
	// so its calls go to the gray instances of a gray request.
	handler := httpctx.Middleware(lb)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), "GET", "http://user-service/users/42", nil)
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		io.Copy(w, resp.Body)
	}))
	// end snippet

	srv := httptest.NewServer(handler)
	defer srv.Close()
	for i := 0; i < 4; i++ {
		if got := get(t, http.DefaultClient, srv.URL, "gray", "true"); got != "user-service-gray gray=true" {
			t.Errorf("gray: true: %q", got)
		}
		if got := get(t, http.DefaultClient, srv.URL); got != "user-service-prod gray=" {
			t.Errorf("no header: %q", got)
		}
	}
	// The client alone: a request's own header.
	if got := get(t, client, "http://user-service/", "gray", "true"); got != "user-service-gray gray=true" {
		t.Errorf("client, gray: true: %q", got)
	}
}

// README.md, A first look: gRPC.
func TestFirstLookGRPC(t *testing.T) {
	reg := graylb.NewRegistry()
	grpcService(t, reg, "user-service")

	// snippet: first-look-grpc
	lb, err := graylb.New(reg)
	if err != nil {
		log.Fatal(err)
	}
	defer lb.Close()

	// A client of user-service: each call goes to an instance of its kind.
	conn, err := grpc.NewClient("graylb:///user-service",
		append(grpcctx.DialOptions(lb), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	// A server: the interceptors keep the incoming gray metadata, so the
	// calls its handlers make with their context stay gray.
	srv := grpc.NewServer(grpcctx.ServerOptions(lb)...)
	// end snippet

	front := serveGRPC(t, srv, &named{name: "front", next: testgrpc.NewTestServiceClient(conn)})
	fc, err := grpc.NewClient(front, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	c := testgrpc.NewTestServiceClient(fc)
	for i := 0; i < 4; i++ {
		if got := unary(t, c, "gray", "true"); got != "front → user-service-gray" {
			t.Errorf("gray: true: %q", got)
		}
		if got := unary(t, c); got != "front → user-service-prod" {
			t.Errorf("no metadata: %q", got)
		}
	}
}
