package faulttest

import (
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// backend is one instance: an HTTP server on loopback that answers every
// request "<name> <kind>", the kind it was started as.
type backend struct {
	name string
	gray bool
	addr string // 127.0.0.1:port
}

func (b *backend) port() int { return b.ln().Port }

func (b *backend) ln() *net.TCPAddr {
	a, _ := net.ResolveTCPAddr("tcp", b.addr)
	return a
}

// startBackend starts an instance, stopped when the test ends.
func startBackend(t *testing.T, name string, gray bool) *backend {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	kind := "prod"
	if gray {
		kind = "gray"
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, name+" "+kind)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return &backend{name: name, gray: gray, addr: l.Addr().String()}
}

// metadata is the instance's registry metadata: its gray flag.
func (b *backend) metadata() map[string]string {
	if b.gray {
		return map[string]string{"gray": "true"}
	}
	return map[string]string{"gray": "false"}
}
