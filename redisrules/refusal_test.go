package redisrules_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/debugpage"
	"github.com/graylb/graylb/redisrules"
	"github.com/stretchr/testify/require"
)

// Content refused while watching reaches the LoadBalancer's RulesState and
// its debug page, once per distinct content.
func TestRefusalsReachRulesState(t *testing.T) {
	rc, k := shared(t)
	ctx := ctxT(t)
	log, _ := newLogger()
	src, err := redisrules.New(rc, redisrules.WithKeys(k[0], k[1], k[2]), redisrules.WithPollInterval(20*time.Millisecond),
		redisrules.WithNotifications(redisrules.NotifyOff), redisrules.WithLogger(log))
	require.NoError(t, err)
	defer src.Close()
	require.NoError(t, rc.Set(ctx, k[0], "true", 0).Err())
	reg := graylb.NewRegistry()
	require.NoError(t, reg.Register(graylb.NewInstance("svc", "127.0.0.1", 9000, nil)))
	lb, err := graylb.New(reg, graylb.WithRuleSource(src))
	require.NoError(t, err)
	defer lb.Close()
	_, err = lb.Pick(context.Background(), "svc")
	require.NoError(t, err)
	require.Equal(t, uint64(1), lb.RulesState().Changes)

	require.NoError(t, rc.RPush(ctx, k[2], "10.0.0.9/32").Err())
	eventually(t, "the refusal recorded", func() bool { return lb.RulesState().Refused == 1 })
	st := lb.RulesState()
	require.Contains(t, st.LastRefusedError, k[2])
	require.Contains(t, st.LastRefusedError, "10.0.0.9/32")

	rec := httptest.NewRecorder()
	debugpage.Handler(lb).ServeHTTP(rec, httptest.NewRequest("GET", "/?format=json", nil))
	var ds debugpage.State
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &ds))
	require.Equal(t, uint64(1), ds.Rules.Refused)
	require.Contains(t, ds.Rules.LastRefusedError, k[2])

	// Fixed: in force, and the polls that saw the bad content in between
	// did not count it again.
	require.NoError(t, rc.LSet(ctx, k[2], 0, "10.0.0.9").Err())
	eventually(t, "the fixed address in force", func() bool { return len(lb.RulesState().Rules.GrayAddresses) == 1 })
	require.Equal(t, uint64(1), lb.RulesState().Refused)
	// The same bad content again is a new refusal.
	require.NoError(t, rc.LSet(ctx, k[2], 0, "10.0.0.9/32").Err())
	eventually(t, "the second refusal recorded", func() bool { return lb.RulesState().Refused == 2 })
}
