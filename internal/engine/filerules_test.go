package engine

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFileRuleSource(t *testing.T) {
	path := t.TempDir() + "/rules.json"
	require.NoError(t, writeFile(path, `{"closed":true}`))
	var logs syncBuffer
	src, err := NewFileRuleSource(path, WithPollInterval(10*time.Millisecond), WithFileLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	require.NoError(t, err)
	lb, _ := newTestLB(t, []Instance{inst("svc", 1, "gray", "true"), inst("svc", 2)}, WithRuleSource(src))
	g := withHeaders(context.Background(), "gray", "true")
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

	_, err = NewFileRuleSource("")
	assert.ErrorIs(t, err, ErrInvalidRules)
	missing, _ := NewFileRuleSource(t.TempDir() + "/missing.json")
	_, err = missing.Load(context.Background())
	assert.Error(t, err)
}
