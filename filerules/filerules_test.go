package filerules

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/graylb/graylb"
)

// A LoadBalancer subscribes to the refusals of a Source by itself.
var _ interface{ OnRefused(func(error)) func() } = (*Source)(nil)

// inst makes a usable instance; md is key, value pairs.
func inst(service string, port int, md ...string) graylb.Instance {
	m := map[string]string{}
	for i := 0; i+1 < len(md); i += 2 {
		m[md[i]] = md[i+1]
	}
	return graylb.NewInstance(service, "127.0.0.1", port, m)
}

func newTestLB(t testing.TB, list []graylb.Instance, opts ...graylb.Option) (*graylb.LoadBalancer, *graylb.Registry) {
	t.Helper()
	reg := graylb.NewRegistry()
	for _, in := range list {
		require.NoError(t, reg.Register(in))
	}
	lb, err := graylb.New(reg, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { lb.Close() })
	return lb, reg
}

// writeFile replaces path's content atomically (a new file renamed over
// it), as a rule file should be updated: a poller never reads it half
// written.
func writeFile(path, content string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func TestSource(t *testing.T) {
	path := t.TempDir() + "/rules.json"
	require.NoError(t, writeFile(path, `{"closed":true}`))
	var logs syncBuffer
	src, err := New(path, WithPollInterval(10*time.Millisecond), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	require.NoError(t, err)
	lb, _ := newTestLB(t, []graylb.Instance{inst("svc", 1, "gray", "true"), inst("svc", 2)}, graylb.WithRuleSource(src))
	g := graylb.WithValue(context.Background(), "gray", "true")
	in, err := lb.Pick(g, "svc")
	require.NoError(t, err)
	assert.Equal(t, 2, in.Port)

	require.NoError(t, writeFile(path, `{"closed":`)) // broken: refused
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "refused") }, 5*time.Second, time.Millisecond)
	in, err = lb.Pick(g, "svc")
	require.NoError(t, err)
	assert.Equal(t, 2, in.Port, "a broken document leaves the old rules")

	require.NoError(t, writeFile(path, `{"closed":false}`))
	require.Eventually(t, func() bool {
		in, err := lb.Pick(g, "svc")
		return err == nil && in.Port == 1
	}, 5*time.Second, 10*time.Millisecond)

	_, err = New("")
	assert.ErrorIs(t, err, graylb.ErrInvalidRules)
	missing, _ := New(t.TempDir() + "/missing.json")
	_, err = missing.Load(context.Background())
	assert.Error(t, err)
}

func TestSourceRefusalsReachRulesState(t *testing.T) {
	path := t.TempDir() + "/rules.json"
	require.NoError(t, writeFile(path, `{"grayUsers":["alice"]}`))
	src, err := New(path, WithPollInterval(5*time.Millisecond), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	require.NoError(t, err)
	reported := make(chan error, 8)
	stopTest := src.OnRefused(func(err error) { reported <- err })
	lb, _ := newTestLB(t, []graylb.Instance{inst("svc", 1)}, graylb.WithRuleSource(src))
	require.Equal(t, uint64(1), lb.RulesState().Changes)
	require.Zero(t, lb.RulesState().Refused)

	// A bad document written after start: refused by Watch, recorded.
	require.NoError(t, writeFile(path, `{"grayUsers":["alice"],"canaryPercent":"<b>x</b>"}`))
	require.Eventually(t, func() bool { return lb.RulesState().Refused == 1 }, 5*time.Second, time.Millisecond)
	st := lb.RulesState()
	require.Contains(t, st.LastRefusedError, path)
	require.NotNil(t, st.LastRefused)
	require.Nil(t, st.LastRefusedRules, "a document that does not parse has no rules")
	require.Equal(t, []string{"alice"}, st.Rules.GrayUsers, "the previous rules stay in force")
	stopTest()
	require.ErrorIs(t, <-reported, graylb.ErrInvalidRules)

	// A valid document again, then a second bad one: counted once more.
	require.NoError(t, writeFile(path, `{"grayUsers":["bob"]}`))
	require.Eventually(t, func() bool { return lb.RulesState().Changes == 2 }, 5*time.Second, time.Millisecond)
	require.NoError(t, writeFile(path, `{"grayUsers":[""]}`))
	require.Eventually(t, func() bool { return lb.RulesState().Refused == 2 }, 5*time.Second, time.Millisecond)
	require.Contains(t, lb.RulesState().LastRefusedError, "grayUsers[0] is empty")

	// Close ends the subscription.
	require.Equal(t, 1, src.refusals.Len())
	require.NoError(t, lb.Close())
	require.Zero(t, src.refusals.Len())
}

func TestRulesStateSourceAndRefusedFirstLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.json")
	require.NoError(t, writeFile(path, `{"closed": null}`))
	src, err := New(path, WithPollInterval(10*time.Millisecond))
	require.NoError(t, err)
	lb, _ := newTestLB(t, []graylb.Instance{inst("svc", 9001)}, graylb.WithRuleSource(src))
	st := lb.RulesState()
	abs, err := filepath.Abs(path)
	require.NoError(t, err)
	require.Equal(t, "file "+abs, st.Source, "the file an operator edits, not a Go type")
	require.Equal(t, uint64(1), st.Refused)
	require.Contains(t, st.LastRefusedError, "null")
	require.Nil(t, st.LastRefusedRules, "a document refused before it became graylb.Rules")

	require.NoError(t, writeFile(path, `{"closed": true}`))
	require.Eventually(t, func() bool { return lb.RulesState().Rules.Closed }, 5*time.Second, 5*time.Millisecond)
}
