package grpcctx

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// testCA is a certificate authority made for one test; issue makes leaf
// certificates with DNS names only (no IP SANs).
type testCA struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	pool   *x509.CertPool
	serial int64
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "graylb test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool, serial: 1}
}

func (ca *testCA) issue(t testing.TB, usage x509.ExtKeyUsage, names ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	ca.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// authorityServer answers with its name, the :authority it received, and
// the TLS server name (SNI) the client asked for.
type authorityServer struct{ testServer }

func (s *authorityServer) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	id := s.name + " " + first(md.Get(":authority"))
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			id += " " + ti.State.ServerName
			if len(ti.State.PeerCertificates) > 0 {
				id += " " + ti.State.PeerCertificates[0].Subject.CommonName
			}
		}
	}
	return &testgrpc.SimpleResponse{ServerId: id}, nil
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// serveTLS starts a TLS gRPC server with cfg at 127.0.0.1 and registers it
// as an instance of service.
func serveTLS(t testing.TB, reg *graylb.Registry, service, name string, cfg *tls.Config) {
	t.Helper()
	srv := &authorityServer{testServer: testServer{name: name}}
	lis := serveRaw(t, srv, append(ServerOptions(nil), grpc.Creds(credentials.NewTLS(cfg))))
	require.NoError(t, reg.Register(graylb.NewInstance(service, "127.0.0.1", lis, nil)))
}

func serveRaw(t testing.TB, srv testgrpc.TestServiceServer, opts []grpc.ServerOption) int {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := grpc.NewServer(opts...)
	testgrpc.RegisterTestServiceServer(s, srv)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return lis.Addr().(*net.TCPAddr).Port
}

// dialTLS dials graylb:///service with TLS credentials over cfg.
func dialTLS(t testing.TB, reg *graylb.Registry, service string, cfg *tls.Config) testgrpc.TestServiceClient {
	t.Helper()
	lb, err := graylb.New(reg, graylb.WithContextHandler(Handler()))
	require.NoError(t, err)
	conn, err := grpc.NewClient("graylb:///"+service, append(DialOptions(lb), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))...)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(); lb.Close() })
	return testgrpc.NewTestServiceClient(conn)
}

func unaryTLS(c testgrpc.TestServiceClient) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{}, grpc.WaitForReady(false))
	if err != nil {
		return "", err
	}
	return r.GetServerId(), nil
}

// The graylb resolver leaves the target's authority (the service name) to
// grpc-go, which verifies the certificate against it: a certificate that
// names only the service, served at 127.0.0.1, is accepted.
func TestTLS_VerifiesServiceName(t *testing.T) {
	ca := newTestCA(t)
	reg := graylb.NewRegistry()
	serveTLS(t, reg, "user-service", "u1", &tls.Config{Certificates: []tls.Certificate{ca.issue(t, x509.ExtKeyUsageServerAuth, "user-service")}})

	got, err := unaryTLS(dialTLS(t, reg, "user-service", &tls.Config{RootCAs: ca.pool}))
	require.NoError(t, err)
	assert.Equal(t, "u1 user-service user-service", got, "authority and server name are the service")
}

func TestTLS_WrongNameRefused(t *testing.T) {
	ca := newTestCA(t)
	reg := graylb.NewRegistry()
	serveTLS(t, reg, "user-service", "impostor", &tls.Config{Certificates: []tls.Certificate{ca.issue(t, x509.ExtKeyUsageServerAuth, "other-service")}})

	_, err := unaryTLS(dialTLS(t, reg, "user-service", &tls.Config{RootCAs: ca.pool}))
	require.Error(t, err)
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.Contains(t, err.Error(), "certificate is valid for other-service, not user-service")

	// An authority the client does not trust is refused too.
	reg2 := graylb.NewRegistry()
	serveTLS(t, reg2, "user-service", "foreign", &tls.Config{Certificates: []tls.Certificate{newTestCA(t).issue(t, x509.ExtKeyUsageServerAuth, "user-service")}})
	_, err = unaryTLS(dialTLS(t, reg2, "user-service", &tls.Config{RootCAs: ca.pool}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "certificate signed by unknown authority")
}

func TestTLS_MutualTLS(t *testing.T) {
	ca := newTestCA(t)
	reg := graylb.NewRegistry()
	serveTLS(t, reg, "user-service", "u1", &tls.Config{
		Certificates: []tls.Certificate{ca.issue(t, x509.ExtKeyUsageServerAuth, "user-service")},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    ca.pool,
	})
	client := ca.issue(t, x509.ExtKeyUsageClientAuth, "order-service")
	got, err := unaryTLS(dialTLS(t, reg, "user-service", &tls.Config{RootCAs: ca.pool, Certificates: []tls.Certificate{client}}))
	require.NoError(t, err)
	assert.Equal(t, "u1 user-service user-service order-service", got)

	_, err = unaryTLS(dialTLS(t, reg, "user-service", &tls.Config{RootCAs: ca.pool}))
	require.Error(t, err, "no client certificate, refused by the server")
}
