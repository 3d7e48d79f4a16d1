package debugpage_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/debugpage"
	"github.com/graylb/graylb/filerules"
)

// staticSource is a user's rule source with fixed rules.
type staticSource struct{}

func (staticSource) Load(context.Context) (graylb.Rules, error) { return graylb.Rules{}, nil }
func (staticSource) Watch(func(graylb.Rules)) (func(), error)   { return func() {}, nil }
func (d describedSource) Describe() string                      { return d.text }
func (stringSource) String() string                             { return "rules at https://admin:s3cret@config.internal/rules" }

// describedSource is a user's rule source that describes itself.
type describedSource struct {
	staticSource
	text string
}

// stringSource is a user's rule source whose String shows its whole
// configuration: not meant for an operator's page.
type stringSource struct{ staticSource }

// The page shows the rules' source as RulesState has it, as text: what
// the source says of itself, else its Go type, never its String.
func TestPageShowsTheRulesSourceAsText(t *testing.T) {
	for src, want := range map[graylb.RuleSource]string{
		describedSource{text: "<b>x</b>"}: "&lt;b&gt;x&lt;/b&gt;",
		stringSource{}:                    "debugpage_test.stringSource",
	} {
		lb, _ := newTestLB(t, []graylb.Instance{inst("svc", 1)}, graylb.WithRuleSource(src))
		_, page := debugGet(t, debugpage.Handler(lb), "/")
		require.Contains(t, page, `<td id="rules-source">`+want+`</td>`)
		require.NotContains(t, page, "s3cret")
		require.NotContains(t, page, "<b>x</b>")
	}
}

// The page shows the Cache's applied counter, which counts each service's
// first list.
func TestPageShowsTheCacheCounters(t *testing.T) {
	lb, reg := newTestLB(t, []graylb.Instance{inst("a", 1), inst("b", 2)})
	ctx := context.Background()
	for _, s := range []string{"a", "b"} {
		_, err := lb.Pick(ctx, s)
		require.NoError(t, err)
	}
	require.NoError(t, reg.Register(inst("a", 3)))
	h := debugpage.Handler(lb)
	require.Eventually(t, func() bool {
		return path(debugJSON(t, h), "cache", "applied") == 3.0
	}, 5*time.Second, time.Millisecond, "an update")
	_, page := debugGet(t, h, "/")
	require.Contains(t, page, `<td class="num" id="cache-applied">3</td>`)
}

// writeFile replaces path's content atomically (a new file renamed over it).
func writeFile(path, content string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// A rule document refused while the source watches shows on the page,
// its text escaped.
func TestPageShowsRefusedRuleDocuments(t *testing.T) {
	path := t.TempDir() + "/rules.json"
	require.NoError(t, writeFile(path, `{"grayUsers":["alice"]}`))
	src, err := filerules.New(path, filerules.WithPollInterval(5*time.Millisecond), filerules.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	require.NoError(t, err)
	lb, _ := newTestLB(t, []graylb.Instance{inst("svc", 1)}, graylb.WithRuleSource(src))
	require.NoError(t, writeFile(path, `{"grayUsers":["alice"],"canaryPercent":"<b>x</b>"}`))
	require.Eventually(t, func() bool { return lb.RulesState().Refused == 1 }, 5*time.Second, time.Millisecond)

	_, body := debugGet(t, debugpage.Handler(lb), "/?format=json")
	var ds debugpage.State
	require.NoError(t, json.Unmarshal([]byte(body), &ds))
	require.Equal(t, uint64(1), ds.Rules.Refused)
	require.NotNil(t, ds.Rules.LastRefused)
	require.Contains(t, ds.Rules.LastRefusedError, path)
	_, page := debugGet(t, debugpage.Handler(lb), "/")
	require.Contains(t, page, `<span id="rules-refused">1</span>`)
	require.NotContains(t, page, "<b>x</b>", "the refused document's text is escaped")
}
