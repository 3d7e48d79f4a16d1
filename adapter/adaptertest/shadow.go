package adaptertest

import (
	"context"
	"testing"

	"github.com/graylb/graylb/adapter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shadowMark: a shadow copy (a call made with adapter.ShadowCopy's
// context) goes to gray instances only, a service with none failing it
// rather than reaching prod; its mark travels through the adapter's server
// side to the next hop, whose calls are gray-only too; an untrusted
// caller's mark is deleted at a trust boundary.
func shadowMark(t *testing.T, d *Driver) {
	e := newEnv(t, d)
	lb, elb := e.lb(), e.lb()
	e.serve(lb, "svc", "prod-1", nil, ServerOptions{})
	e.serve(lb, "svc", "gray-1", map[string]string{"gray": "true"}, ServerOptions{})
	e.serve(lb, "lonely", "lonely-prod", nil, ServerOptions{})
	e.serve(elb, "edge", "edge-gray", map[string]string{"gray": "true"}, ServerOptions{Next: e.dial(elb, "svc")})
	e.serve(elb, "edge", "edge-prod", nil, ServerOptions{Next: e.dial(elb, "svc")})
	e.serve(elb, "public", "public", nil, ServerOptions{Next: e.dial(elb, "svc"),
		Trusted: func(func(string) string) bool { return false }})
	svc, edge, lonely, public := e.dial(lb, "svc"), e.dial(lb, "edge"), e.dial(lb, "lonely"), e.dial(e.lb(), "public")
	ready(t, svc, grayKeys, "gray-1")
	ready(t, svc, nil, "prod-1")
	ready(t, edge, grayKeys, "edge-gray", "gray-1")
	ready(t, lonely, nil, "lonely-prod")
	ready(t, public, nil, "public", "prod-1")

	shadowCall := func(c Client) (Answer, error) {
		ctx, cancel := context.WithTimeout(adapter.ShadowCopy(context.Background()), callTimeout)
		defer cancel()
		return c(ctx, nil)
	}
	for range 4 {
		a, err := shadowCall(svc)
		require.NoError(t, err, "%s: a shadow call", d.Name)
		assert.Equal(t, "gray-1", a.Instance, "%s: a shadow call goes to gray only", d.Name)
		assert.Equal(t, "true", a.Key(adapter.ShadowKey), "%s: the mark travels with the call", d.Name)

		a, err = shadowCall(edge)
		require.NoError(t, err, "%s: a shadow call through a hop", d.Name)
		assert.Equal(t, "edge-gray", a.Instance, d.Name)
		if assert.NotNil(t, a.Next, "%s: %s", d.Name, a.NextErr) {
			assert.Equal(t, "gray-1", a.Next.Instance, "%s: the next hop of a shadow copy is gray only", d.Name)
			assert.Equal(t, "true", a.Next.Key(adapter.ShadowKey), "%s: the mark reaches the next hop", d.Name)
		}

		_, err = shadowCall(lonely)
		assert.Error(t, err, "%s: a shadow call to a service with no gray instance fails, never reaching prod", d.Name)

		a = answer(t, public, map[string]string{adapter.ShadowKey: "true"})
		if assert.NotNil(t, a.Next, "%s: %s", d.Name, a.NextErr) {
			assert.Equal(t, "prod-1", a.Next.Instance, "%s: an untrusted caller's mark routes nothing", d.Name)
			assert.False(t, a.Next.Has(adapter.ShadowKey), "%s: an untrusted caller's mark is not passed on", d.Name)
		}
	}
}
