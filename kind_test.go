package graylb

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
