package engine

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestIsGray(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"true", true}, {"TRUE", true}, {"True", true}, {"tRuE", true},
		{"", false}, {"false", false}, {"FALSE", false}, {"yes", false}, {"1", false},
		{" true", false}, {"true ", false}, {"truee", false}, {"tru", false},
		{"\x54RUE", true}, {"t\x00ue", false}, {"TRU\xc5", false}, {"junk", false},
	} {
		assert.Equal(t, tc.want, IsGray(tc.in), "%q", tc.in)
	}
}

func TestKindText(t *testing.T) {
	for _, k := range []Kind{Prod, Gray} {
		b, err := k.MarshalText()
		require.NoError(t, err)
		var back Kind
		require.NoError(t, back.UnmarshalText(b))
		require.Equal(t, k, back)
	}
	for _, bad := range []string{"", "Gray", "PROD", "true", " gray", "gray ", "1", strings.Repeat("x", 1<<20)} {
		k := Gray
		err := k.UnmarshalText([]byte(bad))
		require.Error(t, err, "%.20q", bad)
		require.Less(t, len(err.Error()), 100, "the error quotes a bounded part of the input")
		require.Equal(t, Gray, k, "unchanged on error")
	}
	// In JSON, as the state types carry it.
	b, err := json.Marshal(struct{ K []Kind }{[]Kind{Prod, Gray}})
	require.NoError(t, err)
	require.JSONEq(t, `{"K":["prod","gray"]}`, string(b))
}
