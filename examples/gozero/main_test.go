package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestOnce(t *testing.T) {
	for _, tc := range []struct {
		canary float64
		want   string
	}{
		{0, `no gray header   edge → order-prod → user-prod
gray: true       edge → order-gray → user-gray
gray: false      edge → order-prod → user-prod
gray: true       edge → order-gray → user-gray
no gray header   edge → order-prod → user-prod
`},
		{100, `no gray header   edge → order-gray → user-gray
gray: true       edge → order-gray → user-gray
gray: false      edge → order-prod → user-prod
gray: true       edge → order-gray → user-gray
no gray header   edge → order-gray → user-gray
`},
	} {
		var out bytes.Buffer
		if err := run(config{once: true, canary: tc.canary}, &out); err != nil {
			t.Fatal(err)
		}
		if got := out.String(); got != tc.want {
			t.Errorf("canary %v:\n%s\nwant\n%s", tc.canary, got, strings.TrimSpace(tc.want))
		}
	}
}
