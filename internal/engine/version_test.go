package engine

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVersionFilter(t *testing.T) {
	list := []Instance{
		inst("svc", 1, "version", "v1"), inst("svc", 2, "version", "v2"), inst("svc", 3),
		inst("svc", 4, "version", "v1", "gray", "true"),
	}
	bg := context.Background()
	for _, tc := range []struct {
		name string
		list []Instance
		self string
		ctx  context.Context
		want []string
	}{
		{"exact version", list, "", withHeaders(bg, "version", "v1"), []string{"127.0.0.1:1"}},
		{"unknown version goes to unversioned", list, "", withHeaders(bg, "version", "v9"), []string{"127.0.0.1:3"}},
		{"no version goes to unversioned", list, "", bg, []string{"127.0.0.1:3"}},
		{"own version", list, "v2", bg, []string{"127.0.0.1:2"}},
		{"header beats own version", list, "v2", withHeaders(bg, "version", "v1"), []string{"127.0.0.1:1"}},
		{"context value", list, "", WithValue(bg, "version", "v2"), []string{"127.0.0.1:2"}},
		{"none unversioned: any", list[:2], "", withHeaders(bg, "version", "v9"), []string{"127.0.0.1:1", "127.0.0.1:2"}},
		{"runs after gray", list, "", withHeaders(bg, "version", "v1", "gray", "true"), []string{"127.0.0.1:4"}},
		{"gray with other version: any gray", list, "", withHeaders(bg, "version", "v2", "gray", "true"), []string{"127.0.0.1:4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lb, _ := newTestLB(t, tc.list, WithFilters(NewVersionFilter(WithSelfVersion(tc.self))))
			got, err := pickedSet(t, lb, tc.ctx, "svc", 10)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
