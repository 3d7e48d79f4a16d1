package nacos

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// listServer answers every list read with n instances, and every config
// read with a document naming n.
func listServer(n int) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/v1/cs/configs") {
			fmt.Fprintf(w, `{"n":%d}`, n)
			return
		}
		hosts := make([]string, n)
		for i := range hosts {
			hosts[i] = fmt.Sprintf(`{"ip":"10.0.0.%d","port":80,"weight":1,"healthy":true,"enabled":true}`, i+1)
		}
		fmt.Fprintf(w, `{"name":"DEFAULT_GROUP@@svc","hosts":[%s]}`, strings.Join(hosts, ","))
	}))
}

// With several servers the reads over HTTP stay on the server that last
// answered, and move to another only when it fails: two servers that
// disagree for a while (one restarted, its lists still filling) do not
// make the list handed over flip between their views every period.
func TestClient_HTTPReadsStayOnTheServerThatAnswers(t *testing.T) {
	a, b := listServer(3), listServer(2)
	defer b.Close()
	dir := t.TempDir()
	c, err := NewClient(context.Background(), WithServers(strings.TrimPrefix(a.URL, "http://"), strings.TrimPrefix(b.URL, "http://")),
		WithCacheDir(dir), WithLogDir(dir), WithLogLevel("error"), WithTimeout(300*time.Millisecond), WithoutDiskCacheAtStart())
	require.NoError(t, err)
	defer c.Close()
	require.Eventually(t, func() bool { return c.builtServer() != nil }, 30*time.Second, 10*time.Millisecond, "the SDK's client built")
	ctx := context.Background()
	list := func() int {
		t.Helper()
		hosts, err := c.listOverHTTP(ctx, "svc", "DEFAULT_GROUP", nil)
		require.NoError(t, err)
		return len(hosts)
	}
	doc := func() string {
		t.Helper()
		d, found, err := c.configOverHTTP(ctx, "rules", "DEFAULT_GROUP")
		require.NoError(t, err)
		require.True(t, found)
		return d
	}
	n, d := list(), doc()
	for i := 0; i < 10; i++ {
		require.Equal(t, n, list(), "list read %d: the list came from another server", i)
	}
	for i := 0; i < 10; i++ {
		require.Equal(t, d, doc(), "config read %d: the document came from another server", i)
	}
	a.Close() // the server the reads were on, if it was a, fails: they move to b and stay there
	for i := 0; i < 10; i++ {
		require.Equal(t, 2, list(), "list read %d after a stopped", i)
		require.Equal(t, `{"n":2}`, doc(), "config read %d after a stopped", i)
	}
}
