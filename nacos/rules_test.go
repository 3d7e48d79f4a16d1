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
	"github.com/graylb/graylb/debugpage"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/config_client"
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
	debugpage.Handler(lb).ServeHTTP(rec, httptest.NewRequest("GET", "/?format=json", nil))
	var ds debugpage.State
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

// sdkConfig is fakeConfig behind the SDK's config client interface, for
// WithConfigClient.
type sdkConfig struct {
	config_client.IConfigClient
	f *fakeConfig
}

func (s sdkConfig) GetConfig(p vo.ConfigParam) (string, error) { return s.f.GetConfig(p) }
func (s sdkConfig) ListenConfig(p vo.ConfigParam) error        { return s.f.ListenConfig(p) }
func (s sdkConfig) CancelListenConfig(p vo.ConfigParam) error  { return s.f.CancelListenConfig(p) }

// The rules' source is shown as an operator finds it in Nacos: group and
// data id, namespace, server; never a credential. Before, the page showed
// the Go type *nacos.RuleSource.
func TestRuleSourceDescribesItself(t *testing.T) {
	secret := []Option{WithCredentials("nacos-user", "s3cret-pw"), WithAccessKey("AK-1", "SK-s3cret")}
	shared := &Client{cfg: newConfig(append([]Option{WithServers("10.0.0.1:8848", "10.0.0.2:8848"), WithNamespace("dev")}, secret...)),
		configCl: sdkConfig{f: &fakeConfig{}}}
	for _, tc := range []struct {
		name   string
		dataID string
		opts   []Option
		want   string
	}{
		{"the program's config client", "", []Option{WithConfigClient(sdkConfig{f: &fakeConfig{}}), WithServers("10.0.0.9:8848")},
			"nacos config DEFAULT_GROUP/graylb-rules.json (through the program's SDK config client)"},
		{"a group and a namespace", "app-rules.json", []Option{WithConfigClient(sdkConfig{f: &fakeConfig{}}), WithGroup("GRAY"), WithNamespace("dev")},
			"nacos config GRAY/app-rules.json in namespace dev (through the program's SDK config client)"},
		{"a shared Client: its servers and namespace", "", []Option{WithClient(shared), WithGroup("G")},
			"nacos config G/graylb-rules.json in namespace dev @ 10.0.0.1:8848,10.0.0.2:8848"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := NewRuleSource(tc.dataID, append(tc.opts, secret...)...)
			require.NoError(t, err)
			defer src.Close()
			reg := graylb.NewRegistry()
			lb, err := graylb.New(reg, graylb.WithRuleSource(src))
			require.NoError(t, err)
			defer lb.Close()
			got := lb.RulesState().Source
			require.Equal(t, tc.want, got)
			for _, s := range []string{"s3cret", "nacos-user", "AK-1"} {
				require.NotContains(t, got, s)
			}
		})
	}
}
