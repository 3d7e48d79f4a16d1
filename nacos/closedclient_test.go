package nacos

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/stretchr/testify/require"
)

// A closed Client reads nothing over HTTP: a Supplier or RuleSource on it
// that was not closed (their catch-up goes on) sends no request to the
// server once the Client is closed.
func TestClient_ClosedReadsNothingOverHTTP(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if strings.HasSuffix(r.URL.Path, "/v1/cs/configs") {
			w.Write([]byte(`{}`))
			return
		}
		w.Write([]byte(`{"name":"DEFAULT_GROUP@@svc","hosts":[]}`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	c, err := NewClient(context.Background(), WithServers(strings.TrimPrefix(srv.URL, "http://")),
		WithCacheDir(dir), WithLogDir(dir), WithLogLevel("error"), WithTimeout(300*time.Millisecond), WithoutDiskCacheAtStart())
	require.NoError(t, err)
	defer c.Close()
	require.Eventually(t, func() bool { return c.builtServer() != nil }, 30*time.Second, 10*time.Millisecond, "the SDK's client built")
	ctx := context.Background()
	_, err = c.listOverHTTP(ctx, "svc", "DEFAULT_GROUP", nil)
	require.NoError(t, err, "a read before Close")
	_, _, err = c.configOverHTTP(ctx, "rules", "DEFAULT_GROUP")
	require.NoError(t, err, "a read before Close")
	require.EqualValues(t, 2, requests.Load())

	require.NoError(t, c.Close())
	_, err = c.listOverHTTP(ctx, "svc", "DEFAULT_GROUP", nil)
	require.True(t, errors.Is(err, graylb.ErrClosed), "list after Close: %v", err)
	_, _, err = c.configOverHTTP(ctx, "rules", "DEFAULT_GROUP")
	require.True(t, errors.Is(err, graylb.ErrClosed), "config after Close: %v", err)
	require.EqualValues(t, 2, requests.Load(), "requests after Close")
}
