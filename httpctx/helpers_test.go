package httpctx

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/stretchr/testify/require"
)

// register adds srv to reg as an instance of service.
func register(t testing.TB, reg *graylb.Registry, service string, srv *httptest.Server, md map[string]string) graylb.Instance {
	t.Helper()
	host, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)
	p, _ := strconv.Atoi(port)
	in := graylb.NewInstance(service, host, p, md)
	require.NoError(t, reg.Register(in))
	return in
}

// deadAddr returns a loopback port nothing listens on.
func deadAddr(t testing.TB) (string, int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().(*net.TCPAddr)
	l.Close()
	return addr.IP.String(), addr.Port
}

func named(name string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, name)
	}))
}

// hop is a service instance that calls next through graylb and answers
// "name>" + what next answered.
func hop(t testing.TB, name string, reg *graylb.Registry, next string, self bool) *httptest.Server {
	lb, err := graylb.New(reg, graylb.WithContextHandler(Handler()), graylb.WithSelfGray(self))
	require.NoError(t, err)
	t.Cleanup(func() { lb.Close() })
	client := &http.Client{Transport: NewTransport(lb)}
	srv := httptest.NewServer(Middleware(lb)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://"+next+"/", nil)
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		io.WriteString(w, name+">"+string(b))
	})))
	t.Cleanup(srv.Close)
	return srv
}

func fetch(t testing.TB, url string, hdr ...string) (string, int) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), resp.StatusCode
}

// reliabilityFragment writes a row for RELIABILITY.md into the folder named
// by GRAYLB_RELIABILITY_OUT (make test-reliability gathers them); without
// it the row only goes to the test log.
func reliabilityFragment(t *testing.T, name, text string) {
	t.Log(text)
	if dir := os.Getenv("GRAYLB_RELIABILITY_OUT"); dir != "" {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".md"), []byte(text), 0o644))
	}
}

// admitted returns a context carrying h's routing keys as a server side
// admits them (the default key names).
func admitted(h http.Header) context.Context {
	return adapter.For(nil).Admitter().Admit(context.Background(), headerCarrier(h.Clone()), adapter.Admission{})
}
