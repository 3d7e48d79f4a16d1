package nacos

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Client reads the list over the server's HTTP API in the namespace
// and group it is given, as its gRPC query does.
func TestIntegration_ListOverHTTP(t *testing.T) {
	for _, tc := range []struct {
		name, namespace, group string
	}{
		{"defaults", "", ""},
		{"group", "", "graylb-it-group"},
		{"namespace and group", "graylb-it-ns", "graylb-it-group"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := fmt.Sprintf("it-list-http-%d", time.Now().UnixNano()%1e9)
			opts := testOpts(t, WithNamespace(tc.namespace), WithGroup(tc.group))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			reg, err := Register(ctx, Service{Name: svc, Host: "127.0.0.1", Port: 7801, Metadata: map[string]string{"k": "v"}}, opts...)
			require.NoError(t, err)
			t.Cleanup(func() { reg.Close() })
			c, err := NewClient(ctx, testOpts(t, WithNamespace(tc.namespace))...)
			require.NoError(t, err)
			t.Cleanup(func() { c.Close() })
			group := newConfig([]Option{WithGroup(tc.group)}).group
			viaGRPC, err := c.query(ctx, svc, group, nil)
			require.NoError(t, err)
			require.Len(t, viaGRPC, 1)
			viaHTTP, err := c.listOverHTTP(ctx, svc, group, nil)
			require.NoError(t, err)
			require.Len(t, viaHTTP, 1)
			assert.Equal(t, hostKey(viaGRPC[0]), hostKey(viaHTTP[0]), "the same instance, the same state")
			assert.Equal(t, "v", viaHTTP[0].Metadata["k"])

			other, err := c.listOverHTTP(ctx, svc, group+"-other", nil)
			require.NoError(t, err)
			assert.Empty(t, other, "another group's list")
		})
	}
}
