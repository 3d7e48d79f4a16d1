package otelgraylb_test

import (
	"context"
	"strings"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/graylb/graylb/otelgraylb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/baggage"
)

// headers is a call's headers as an adapter.Carrier.
type headers map[string]string

func (h headers) Get(name string) string {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

func (h headers) Set(name, value string) { h.Delete(name); h[name] = value }

func (h headers) Delete(name string) {
	for k := range h {
		if strings.EqualFold(k, name) {
			delete(h, k)
		}
	}
}

// The program's user id (Admission.User) replaces the one a trusted caller
// sent in its baggage, as it replaces a user header: the member goes from
// the call's baggage header and from the context's baggage, even when the
// program has no user for the call. (A trusted caller's baggage uid=alice
// used to make the request a gray user's while the program said none.)
func TestAdmit_ProgramsUserReplacesTheBaggageMember(t *testing.T) {
	reg := graylb.NewRegistry()
	require.NoError(t, reg.Register(graylb.NewInstance("svc", "10.0.0.1", 80, nil)))
	require.NoError(t, reg.Register(graylb.NewInstance("svc", "10.0.0.2", 80, map[string]string{"gray": "true"})))
	lb, err := graylb.New(reg, otelgraylb.WithBaggage(), graylb.WithRules(graylb.Rules{GrayUsers: []string{"alice"}}))
	require.NoError(t, err)
	defer lb.Close()
	adm := adapter.For(lb).Admitter()
	inCtx, err := baggage.Parse("uid=alice,other=y")
	require.NoError(t, err)
	for _, user := range []string{"", "bob"} {
		h := headers{"Baggage": "UID=alice,other=x"}
		ctx := adm.Admit(baggage.ContextWithBaggage(context.Background(), inCtx), h, adapter.Admission{
			User: func(context.Context) string { return user },
		})
		assert.Equal(t, user, adapter.KeptFrom(ctx).Get("uid"), "the admitted user id")
		assert.Equal(t, "other=x", h.Get("baggage"), "the call's baggage")
		assert.Equal(t, "", baggage.FromContext(ctx).Member("uid").Value(), "the context's baggage")
		assert.Equal(t, "y", baggage.FromContext(ctx).Member("other").Value(), "the context's other members")
		in, err := lb.Pick(ctx, "svc")
		require.NoError(t, err)
		assert.Equal(t, "10.0.0.1", in.Host, "the pick of a request whose program user is %q", user)
	}
	// Without Admission.User the caller's member is its user id.
	ctx := adm.Admit(context.Background(), headers{"baggage": "uid=alice"}, adapter.Admission{})
	assert.Equal(t, "alice", adapter.KeptFrom(ctx).Get("uid"))
}
