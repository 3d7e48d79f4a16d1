package nacos

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/graylb/graylb"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
	"github.com/stretchr/testify/require"
)

// fakeConfig stands in for the SDK's config client: one document, and the
// listener the RuleSource registered, which push calls as the SDK would.
type fakeConfig struct {
	mu       sync.Mutex
	data     string
	listener func(namespace, group, dataID, data string)
}

func (f *fakeConfig) GetConfig(vo.ConfigParam) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.data, nil
}

func (f *fakeConfig) ListenConfig(p vo.ConfigParam) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listener = p.OnChange
	return nil
}

func (f *fakeConfig) CancelListenConfig(vo.ConfigParam) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listener = nil
	return nil
}

// push publishes data and calls the listener on its own goroutine, as the
// SDK does, and waits for it.
func (f *fakeConfig) push(data string) {
	f.mu.Lock()
	f.data = data
	l := f.listener
	f.mu.Unlock()
	if l == nil {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		l("", "DEFAULT_GROUP", DefaultRulesDataID, data)
	}()
	<-done
}

func TestRuleSourceRefusalsReachRulesState(t *testing.T) {
	cc := &fakeConfig{data: `{"grayUsers":["alice"]}`}
	src := &RuleSource{client: cc, dataID: DefaultRulesDataID, group: "DEFAULT_GROUP", logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	reg := graylb.NewRegistry()
	require.NoError(t, reg.Register(graylb.NewInstance("svc", "127.0.0.1", 9000, nil)))
	lb, err := graylb.New(reg, graylb.WithRuleSource(src))
	require.NoError(t, err)
	defer lb.Close()
	_, err = lb.Pick(context.Background(), "svc")
	require.NoError(t, err)
	require.Equal(t, uint64(1), lb.RulesState().Changes)

	cc.push(`{"grayUsers":["alice"],"canaryPercent":101}`)
	st := lb.RulesState()
	require.Equal(t, uint64(1), st.Refused)
	require.Contains(t, st.LastRefusedError, DefaultRulesDataID)
	require.Contains(t, st.LastRefusedError, "canaryPercent")
	require.Equal(t, []string{"alice"}, st.Rules.GrayUsers, "the previous rules stay in force")

	rec := httptest.NewRecorder()
	graylb.DebugHandler(lb).ServeHTTP(rec, httptest.NewRequest("GET", "/?format=json", nil))
	var ds graylb.DebugState
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &ds))
	require.Equal(t, uint64(1), ds.Rules.Refused)
	require.Contains(t, ds.Rules.LastRefusedError, "canaryPercent")

	cc.push(`{"grayUsers":["bob"]}`)
	require.Equal(t, []string{"bob"}, lb.RulesState().Rules.GrayUsers)
	cc.push(``) // removed: kept, not a refusal
	require.Equal(t, uint64(1), lb.RulesState().Refused)

	require.Equal(t, 1, src.refusals.Len())
	require.NoError(t, lb.Close())
	require.Zero(t, src.refusals.Len(), "Close ends the subscription")
}
