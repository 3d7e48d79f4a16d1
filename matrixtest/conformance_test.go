package matrixtest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter/adaptertest"
	"github.com/graylb/graylb/grpcctx"
	"github.com/graylb/graylb/httpctx"
	"github.com/graylb/graylb/otelgraylb"
	"go.opentelemetry.io/otel/baggage"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// otelgraylb's baggage is a carrier like headers and metadata: the key
// parts of the conformance suite (key case, renamed keys, match keys and
// lanes, the trust boundary) pass over HTTP and over gRPC with every key
// a caller sends carried in its W3C baggage instead of under its own name,
// each LoadBalancer made with otelgraylb.WithBaggage. (It runs here, the
// module that has both transports: otelgraylb's own needs neither grpcctx
// nor its Go version.)
func TestConformance_Baggage(t *testing.T) {
	for _, d := range []adaptertest.Driver{httpDriver(), grpcDriver()} {
		d.Options = append(d.Options, otelgraylb.WithBaggage())
		adaptertest.RunKeys(t, adaptertest.InHeader(d, "baggage", packBaggage, unpackBaggage))
	}
}

// packBaggage writes keys as a W3C baggage header with OpenTelemetry's
// writer, each value percent-encoded.
func packBaggage(keys map[string]string) string {
	var ms []baggage.Member
	for k, v := range keys {
		m, err := baggage.NewMember(k, url.PathEscape(v))
		if err != nil {
			panic(fmt.Sprintf("baggage member %s=%q: %v", k, v, err))
		}
		ms = append(ms, m)
	}
	b, err := baggage.New(ms...)
	if err != nil {
		panic(err)
	}
	return b.String()
}

// unpackBaggage reads a W3C baggage header's members with OpenTelemetry's
// parser; nil when it does not parse.
func unpackBaggage(v string) map[string]string {
	b, err := baggage.Parse(v)
	if err != nil {
		return nil
	}
	out := map[string]string{}
	for _, m := range b.Members() {
		out[m.Key()] = m.Value()
	}
	return out
}

// httpDriver is httpctx's conformance driver: servers are
// httpctx.Middleware on net/http servers, clients http.Clients over
// httpctx.NewTransport.
func httpDriver() adaptertest.Driver {
	return adaptertest.Driver{
		Name: "httpctx",
		Serve: func(t *testing.T, lb *graylb.LoadBalancer, l net.Listener, o adaptertest.ServerOptions) {
			var opts []httpctx.MiddlewareOption
			if o.Trusted != nil {
				opts = append(opts, httpctx.WithTrusted(func(r *http.Request) bool { return o.Trusted(r.Header.Get) }))
			}
			if o.User != nil {
				opts = append(opts, httpctx.WithUser(func(r *http.Request) string { return o.User(r.Header.Get) }))
			}
			if len(o.Propagated) > 0 {
				opts = append(opts, httpctx.WithPropagated(o.Propagated...))
			}
			srv := &http.Server{Handler: httpctx.Middleware(lb, opts...)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				a, err := adaptertest.Respond(r.Context(), o, r.Header)
				if err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
					return
				}
				adaptertest.WriteHTTP(w, r, o, a)
			}))}
			go srv.Serve(l)
			t.Cleanup(func() { srv.Close() })
		},
		Dial: func(t *testing.T, _ *graylb.Registry, lb *graylb.LoadBalancer, service string) adaptertest.Client {
			base := &http.Transport{}
			t.Cleanup(base.CloseIdleConnections)
			client := &http.Client{Transport: httpctx.NewTransport(lb, httpctx.WithBase(base))}
			return func(ctx context.Context, keys map[string]string) (adaptertest.Answer, error) {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+service+"/", nil)
				if err != nil {
					return adaptertest.Answer{}, err
				}
				for k, v := range keys {
					req.Header.Add(k, v)
				}
				resp, err := client.Do(req)
				if err != nil {
					return adaptertest.Answer{}, err
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				if err != nil {
					return adaptertest.Answer{}, err
				}
				if resp.StatusCode != http.StatusOK {
					return adaptertest.Answer{}, fmt.Errorf("status %d: %s", resp.StatusCode, b)
				}
				return adaptertest.ParseAnswer(b)
			}
		},
	}
}

// grpcDriver is grpcctx's conformance driver: servers are grpc-go servers
// with grpcctx.ServerOptions serving the interop TestService, clients
// connections to graylb:///<service> with grpcctx.DialOptions.
func grpcDriver() adaptertest.Driver {
	return adaptertest.Driver{
		Name: "grpcctx",
		Serve: func(t *testing.T, lb *graylb.LoadBalancer, l net.Listener, o adaptertest.ServerOptions) {
			var opts []grpcctx.Option
			if o.Trusted != nil {
				opts = append(opts, grpcctx.WithTrusted(func(ctx context.Context) bool { return o.Trusted(incomingKeys(ctx)) }))
			}
			if o.User != nil {
				opts = append(opts, grpcctx.WithUser(func(ctx context.Context) string { return o.User(incomingKeys(ctx)) }))
			}
			if len(o.Propagated) > 0 {
				opts = append(opts, grpcctx.WithPropagated(o.Propagated...))
			}
			s := grpc.NewServer(grpcctx.ServerOptions(lb, opts...)...)
			testgrpc.RegisterTestServiceServer(s, &conformer{o: o})
			go s.Serve(l)
			t.Cleanup(s.Stop)
		},
		Dial: func(t *testing.T, _ *graylb.Registry, lb *graylb.LoadBalancer, service string) adaptertest.Client {
			conn, err := grpc.NewClient("graylb:///"+service,
				append(grpcctx.DialOptions(lb), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close() })
			c := testgrpc.NewTestServiceClient(conn)
			return func(ctx context.Context, keys map[string]string) (adaptertest.Answer, error) {
				for k, v := range keys {
					ctx = metadata.AppendToOutgoingContext(ctx, k, v)
				}
				r, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
				if err != nil {
					return adaptertest.Answer{}, err
				}
				return adaptertest.ParseAnswer([]byte(r.GetServerId()))
			}
		},
	}
}

// incomingKeys reads the call's incoming metadata by name.
func incomingKeys(ctx context.Context) func(string) string {
	md, _ := metadata.FromIncomingContext(ctx)
	return func(name string) string {
		if v := md.Get(name); len(v) > 0 {
			return v[0]
		}
		return ""
	}
}

// conformer answers UnaryCall with adaptertest.Respond, the Answer as the
// response's server id.
type conformer struct {
	testgrpc.UnimplementedTestServiceServer
	o adaptertest.ServerOptions
}

func (s *conformer) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	a, err := adaptertest.Respond(ctx, s.o, md)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &testgrpc.SimpleResponse{ServerId: string(a.Encode())}, nil
}
