package docs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/grpcctx"
	"github.com/graylb/graylb/httpctx"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
)

// testCA is an internal CA that issues certificates naming services.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a certificate for names (DNS names) with the usage, and
// its PEM certificate and key.
func (ca *testCA) issue(t *testing.T, usage x509.ExtKeyUsage, names ...string) (tls.Certificate, []byte, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: names[0]},
		DNSNames: names, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c, certPEM, keyPEM
}

// mutualTLS is a server configuration with cert that requires a client
// certificate from ca.
func mutualTLS(ca *testCA, cert tls.Certificate) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
}

// docs/https.md: https://user-service/ with certificates that name the
// service, mutual TLS.
func TestHTTPSClient(t *testing.T) {
	ca := newTestCA(t)
	serverCert, _, _ := ca.issue(t, x509.ExtKeyUsageServerAuth, "user-service")
	_, clientPEM, clientKey := ca.issue(t, x509.ExtKeyUsageClientAuth, "order-service")
	dir := t.TempDir()
	for name, data := range map[string][]byte{"client.crt": clientPEM, "client.key": clientKey} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir) // the snippet reads client.crt and client.key from where it runs
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "user-service over "+r.Proto+" for "+r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	srv.TLS = mutualTLS(ca, serverCert)
	srv.StartTLS()
	defer srv.Close()
	supplier := graylb.NewRegistry()
	host, port := hostPort(t, srv.Listener.Addr().String())
	supplier.Register(graylb.NewInstance("user-service", host, port, nil))
	caPEM := ca.pem

	// snippet: https-client
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM) // your internal CA

	clientCert, err := tls.LoadX509KeyPair("client.crt", "client.key") // only for mutual TLS
	if err != nil {
		log.Fatal(err)
	}

	base := http.DefaultTransport.(*http.Transport).Clone() // keeps HTTP/2, proxies, timeouts
	base.TLSClientConfig = &tls.Config{
		RootCAs:      pool,
		Certificates: []tls.Certificate{clientCert}, // omit without mutual TLS
		MinVersion:   tls.VersionTLS12,
	}

	lb, err := graylb.New(supplier)
	if err != nil {
		log.Fatal(err)
	}
	defer lb.Close()

	client := &http.Client{Transport: httpctx.NewTransport(lb, httpctx.WithBase(base))}
	resp, err := client.Get("https://user-service/users/42")
	// end snippet

	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "user-service over HTTP/1.1 for order-service" {
		t.Errorf("answer: %q", b)
	}
}

// docs/https.md: TLS over gRPC.
func TestHTTPSGRPC(t *testing.T) {
	ca := newTestCA(t)
	serverCert, _, _ := ca.issue(t, x509.ExtKeyUsageServerAuth, "user-service")
	clientCert, _, _ := ca.issue(t, x509.ExtKeyUsageClientAuth, "order-service")
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	reg := graylb.NewRegistry()
	addr := serveGRPC(t, grpc.NewServer(grpc.Creds(credentials.NewTLS(mutualTLS(ca, serverCert)))), &named{name: "user-service"})
	host, port := hostPort(t, addr)
	reg.Register(graylb.NewInstance("user-service", host, port, nil))
	lb, err := graylb.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()

	// snippet: https-grpc
	creds := credentials.NewTLS(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{clientCert}})
	conn, err := grpc.NewClient("graylb:///user-service",
		append(grpcctx.DialOptions(lb), grpc.WithTransportCredentials(creds))...)
	// end snippet

	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got := unary(t, testgrpc.NewTestServiceClient(conn)); got != "user-service" {
		t.Errorf("answer: %q", got)
	}
}
