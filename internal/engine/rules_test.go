package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Rule documents that would silently switch rules off are refused with an
// error that names the problem.
func TestParseRules_RefusesDocumentsThatSilentlySwitchOff(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`null`, "not a JSON object"},
		{` null `, "not a JSON object"},
		{`"closed"`, "not a JSON object"},
		{`{"closed":true,"closed":false}`, `"closed" appears twice`},
		{`{"grayUsers":["a"],"grayUsers":[]}`, `"grayUsers" appears twice`},
		{`{"Closed":true}`, `unknown key "Closed"`},
		{`{"CLOSED":true}`, `unknown key "CLOSED"`},
		{`{"grayusers":["a"]}`, `unknown key "grayusers"`},
		{`{"closed":null}`, `"closed" is null`},
		{`{"grayUsers":null}`, `"grayUsers" is null`},
		{`{"canaryPercent":0.004}`, "canaryPercent 0.004"},
		{`{"canaryPercent":1e-300}`, "canaryPercent 1e-300"},
		{`{"canaryPercent":12.345}`, "canaryPercent 12.345"},
	} {
		_, err := ParseRules([]byte(tc.doc))
		if assert.ErrorIs(t, err, ErrInvalidRules, "%s", tc.doc) {
			assert.Contains(t, err.Error(), tc.want, "%s", tc.doc)
		}
	}
	reliabilityFragment(t, "hostile-03-rule-documents", "| 3. rule documents that would silently switch rules off: `null`, a repeated key, a key in another letter case, a null value, trailing data, a canary below or between the 0.01 steps (also through the file, Nacos and Redis sources, which share ParseRules; FuzzParseRules checks every accepted document) | TestParseRules_RefusesDocumentsThatSilentlySwitchOff, FuzzParseRules | 13 documents, plus the fuzzer below | 0 accepted; previous rules kept |\n")
	for _, ok := range []string{`{}`, `{"canaryPercent":0}`, `{"canaryPercent":12.34}`, `{"canaryPercent":100}`, ` {"closed":true} `} {
		_, err := ParseRules([]byte(ok))
		assert.NoError(t, err, "%s", ok)
	}
}

// SetRules refuses what ParseRules refuses: a percentage below the
// resolution would otherwise be silently zero.
func TestSetRules_RefusesCanaryBelowResolution(t *testing.T) {
	lb, _ := newTestLB(t, []Instance{inst("svc", 1)})
	err := lb.SetRules(Rules{CanaryPercent: 0.004})
	require.ErrorIs(t, err, ErrInvalidRules)
	assert.True(t, strings.Contains(err.Error(), "0.01"), err.Error())
}

func TestRules(t *testing.T) {
	list := []Instance{inst("svc", 1, "gray", "true"), inst("svc", 2), inst("svc", 3)}
	gray, prod, all := []string{"127.0.0.1:1"}, []string{"127.0.0.1:2", "127.0.0.1:3"}, addrs(list)
	off := false
	bg := context.Background()
	g := withHeaders(bg, "gray", "true")
	for _, tc := range []struct {
		name  string
		rules Rules
		ctx   context.Context
		want  []string
	}{
		{"gray user", Rules{GrayUsers: []string{"u1"}}, withHeaders(bg, "uid", "u1"), gray},
		{"gray user beats gray false", Rules{GrayUsers: []string{"u1"}}, withHeaders(bg, "uid", "u1", "gray", "false"), gray},
		{"other user", Rules{GrayUsers: []string{"u1"}}, withHeaders(bg, "uid", "u2"), prod},
		{"gray user from context", Rules{GrayUsers: []string{"u1"}}, WithValue(bg, "uid", "u1"), gray},
		{"gray address by host:port", Rules{GrayAddresses: []string{"127.0.0.1:2"}}, g, []string{"127.0.0.1:1", "127.0.0.1:2"}},
		{"gray address keeps prod from it", Rules{GrayAddresses: []string{"127.0.0.1:2"}}, bg, []string{"127.0.0.1:3"}},
		{"gray address by host", Rules{GrayAddresses: []string{"127.0.0.1"}}, bg, nil},
		{"disabled: gray request anywhere", Rules{Enabled: &off}, g, all},
		{"disabled: prod request anywhere", Rules{Enabled: &off}, bg, all},
		{"closed: gray goes to prod", Rules{Closed: true}, g, prod},
		{"closed beats disabled", Rules{Closed: true, Enabled: &off}, g, prod},
		{"closed beats gray user", Rules{Closed: true, GrayUsers: []string{"u1"}}, withHeaders(bg, "uid", "u1"), prod},
		{"canary 100", Rules{CanaryPercent: 100}, bg, gray},
		{"canary 100 leaves explicit false", Rules{CanaryPercent: 100}, withHeaders(bg, "gray", "false"), prod},
		{"canary 0", Rules{CanaryPercent: 0}, bg, prod},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lb, _ := newTestLB(t, list, WithRules(tc.rules))
			got, err := pickedSet(t, lb, tc.ctx, "svc", 10)
			if tc.want == nil {
				require.ErrorIs(t, err, ErrNoInstance)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestRules_CanaryIsStickyAndProportional(t *testing.T) {
	list := []Instance{inst("svc", 1, "gray", "true"), inst("svc", 2)}
	lb, _ := newTestLB(t, list, WithRules(Rules{CanaryPercent: 20}))
	grayUsers := 0
	for u := 0; u < 2000; u++ {
		ctx := withHeaders(context.Background(), "uid", "user-"+itoa(u))
		first, err := lb.Pick(ctx, "svc")
		require.NoError(t, err)
		for i := 0; i < 3; i++ {
			again, err := lb.Pick(ctx, "svc")
			require.NoError(t, err)
			require.Equal(t, first.Port, again.Port, "user %d moved side", u)
		}
		if first.Port == 1 {
			grayUsers++
		}
	}
	assert.InDelta(t, 400, grayUsers, 80, "about 20%% of 2000 users")
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

func TestParseRules(t *testing.T) {
	r, err := ParseRules([]byte(`{"enabled":false,"closed":true,"grayUsers":["a"],"grayAddresses":["10.0.0.1:80","host"],"canaryPercent":12.5}`))
	require.NoError(t, err)
	require.NotNil(t, r.Enabled)
	assert.False(t, *r.Enabled)
	assert.True(t, r.Closed)
	for _, bad := range []string{
		``, `{`, `[]`, `{"canaryPercent":101}`, `{"canaryPercent":-1}`, `{"grayUsers":[""]}`,
		`{"grayAddresses":["1.2.3.4:0"]}`, `{"grayAddresses":[":80"]}`, `{"grayAddresses":["a b"]}`,
		`{"unknown":1}`, `{} {}`, `{"enabled":"yes"}`,
	} {
		_, err := ParseRules([]byte(bad))
		assert.ErrorIs(t, err, ErrInvalidRules, "%s", bad)
	}
}

func TestSetRules_InvalidKeepsPrevious(t *testing.T) {
	list := []Instance{inst("svc", 1, "gray", "true"), inst("svc", 2)}
	lb, _ := newTestLB(t, list, WithRules(Rules{Closed: true}))
	g := withHeaders(context.Background(), "gray", "true")
	in, err := lb.Pick(g, "svc")
	require.NoError(t, err)
	assert.Equal(t, 2, in.Port)
	require.ErrorIs(t, lb.SetRules(Rules{CanaryPercent: 200}), ErrInvalidRules)
	in, err = lb.Pick(g, "svc")
	require.NoError(t, err)
	assert.Equal(t, 2, in.Port, "closed is still in force")
	require.NoError(t, lb.SetRules(Rules{}))
	in, err = lb.Pick(g, "svc")
	require.NoError(t, err)
	assert.Equal(t, 1, in.Port)
}
