package graylb

import (
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
