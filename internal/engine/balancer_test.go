package engine

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A rules change that lands while a service is being added (after its
// first routing was built, before it is published) must reach that
// service: prod never reaches an instance the newest rules mark gray.
func TestSetRules_ReachesServiceBeingAdded(t *testing.T) {
	list := []Instance{inst("svc", 1), inst("svc", 2)}
	lb, _ := newTestLB(t, list)
	lb.testHookServiceBuilt = func() {
		require.NoError(t, lb.SetRules(Rules{GrayAddresses: []string{"127.0.0.1:2"}}))
	}
	prod := withHeaders(context.Background(), "gray", "false")
	for i := 0; i < 100; i++ {
		in, err := lb.Pick(prod, "svc")
		require.NoError(t, err)
		require.Equal(t, 1, in.Port, "pick %d: prod reached 127.0.0.1:2, gray by the newest rules", i)
	}
	reliabilityFragment(t, "hostile-02a-rules-race-hook", "| 2. a rules change between a new service's first build and its publication (a hook between the two steps) | TestSetRules_ReachesServiceBeingAdded | 100 prod picks | 0 on the address the newest rules made gray |\n")
}

// The same race without a hook, as it happens: a rules change lands at a
// random moment while a large service is added. Whatever the timing, the
// service then routes by the newest rules.
func TestSetRules_RaceWithFirstUse(t *testing.T) {
	reg := NewRegistry()
	const n = 3000
	for p := 1; p <= n; p++ {
		require.NoError(t, reg.Register(inst("svc", p)))
	}
	prod := withHeaders(context.Background(), "gray", "false")
	final := Rules{GrayAddresses: []string{"127.0.0.1:1"}}
	for round := 0; round < 30; round++ {
		lb, err := New(reg, WithContextHandler(testHandler), WithPolicy(StrictRoundRobin()))
		require.NoError(t, err)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, err := lb.Pick(prod, "svc")
			assert.NoError(t, err)
		}()
		go func() {
			defer wg.Done()
			spin(time.Duration(rand.IntN(4000)) * time.Microsecond)
			assert.NoError(t, lb.SetRules(final))
		}()
		wg.Wait()
		for i := 0; i < n; i++ {
			in, err := lb.Pick(prod, "svc")
			require.NoError(t, err)
			require.NotEqual(t, 1, in.Port, "round %d: prod reached 127.0.0.1:1, gray by the newest rules", round)
		}
		lb.Close()
	}
	reliabilityFragment(t, "hostile-02b-rules-race", fmt.Sprintf("| 2. a rules change at a random moment while a service of %d instances is added (no hook; fails 1 in a few rounds without the fix) | TestSetRules_RaceWithFirstUse | 30 rounds × %d prod picks | 0 |\n", n, n))
}

// spin waits d without sleeping (a sleep is far coarser than d).
func spin(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}

// blockingSource is a rule source whose server never answers.
type blockingSource struct{}

func (blockingSource) Load(ctx context.Context) (Rules, error) {
	<-ctx.Done()
	return Rules{}, ctx.Err()
}
func (blockingSource) Watch(func(Rules)) (func(), error) { return func() {}, nil }

// New never blocks past the bound the caller sets when the rule source
// cannot answer; the initial rules stay in force.
func TestNew_RuleLoadIsBounded(t *testing.T) {
	reg := NewRegistry()
	require.NoError(t, reg.Register(inst("svc", 1, "gray", "true")))
	require.NoError(t, reg.Register(inst("svc", 2)))
	start := time.Now()
	lb, err := New(reg, WithContextHandler(testHandler), WithRuleSource(blockingSource{}),
		WithRules(Rules{Closed: true}), WithRuleLoadTimeout(50*time.Millisecond))
	require.NoError(t, err)
	defer lb.Close()
	assert.Less(t, time.Since(start), 2*time.Second)
	in, err := lb.Pick(withHeaders(context.Background(), "gray", "true"), "svc")
	require.NoError(t, err)
	assert.Equal(t, 2, in.Port, "the initial rules (closed) are in force")
}

// Keys names what every adapter reads, propagates and drops.
func TestLoadBalancer_Keys(t *testing.T) {
	lb, _ := newTestLB(t, []Instance{inst("svc", 1)},
		WithGrayHeader("gray-tag"), WithUserHeader("x-user"), WithGrayKey("gray-tag"),
		WithFilters(NewVersionFilter(WithVersionHeader("x-lane"), WithVersionKey("lane"))))
	assert.Equal(t, Keys{Gray: "gray-tag", User: "x-user", Version: "x-lane", GrayMetadata: "gray-tag", VersionMetadata: "lane"}, lb.Keys())
	assert.Equal(t, []string{"gray-tag", "x-user", "x-lane"}, lb.Keys().Names())
	assert.Equal(t, []string{"gray", "uid", "version"}, (*LoadBalancer)(nil).Keys().Names())
	assert.Equal(t, []string{"gray"}, Keys{Gray: "gray", User: "GRAY"}.Names())
}

// RequestKind says what decided, so an adapter knows when the next hop
// must be told.
func TestLoadBalancer_RequestKind(t *testing.T) {
	lb, _ := newTestLB(t, []Instance{inst("svc", 1)}, WithRules(Rules{GrayUsers: []string{"alice"}}))
	bg := context.Background()
	for _, tc := range []struct {
		ctx  context.Context
		kind Kind
		src  KindSource
	}{
		{bg, Prod, FromDefault},
		{withHeaders(bg, "gray", "true"), Gray, FromKey},
		{withHeaders(bg, "gray", "junk"), Prod, FromKey},
		{WithValue(bg, "gray", "true"), Gray, FromContext},
		{withHeaders(bg, "uid", "alice"), Gray, FromRules},
		{withHeaders(bg, "uid", "bob"), Prod, FromDefault},
	} {
		d := lb.decide(tc.ctx, nil)
		assert.Equal(t, tc.kind, d.Kind)
		assert.Equal(t, tc.src, d.Source)
	}
	require.NoError(t, lb.SetRules(Rules{CanaryPercent: 50}))
	src := lb.decide(bg, nil).Source
	assert.Equal(t, FromRules, src, "the canary draw decided, whichever way")
	assert.False(t, src.Travels())
	src = lb.decide(withHeaders(bg, "gray", "false"), nil).Source
	assert.True(t, src.Travels(), "an explicit key opts out of the canary and travels")
}

// The key the call carries wins over a context value; the canary decides
// only a request whose side nobody chose.
func TestLoadBalancer_DecidePrecedence(t *testing.T) {
	lb, _ := newTestLB(t, []Instance{inst("svc", 1)})
	bg := context.Background()
	assert.Equal(t, Decision{Kind: Gray, Source: FromContext}, lb.decide(WithValue(bg, "gray", "true"), nil))
	assert.Equal(t, Decision{Kind: Prod, Source: FromKey}, lb.decide(WithValue(withHeaders(bg, "gray", "false"), "gray", "true"), nil),
		"the key wins over the context value")
	require.NoError(t, lb.SetRules(Rules{CanaryPercent: 100}))
	assert.Equal(t, Decision{Kind: Gray, Source: FromRules}, lb.decide(bg, nil))
	assert.Equal(t, Decision{Kind: Prod, Source: FromKey}, lb.decide(withHeaders(bg, "gray", "false"), nil))
}

func TestLoadBalancer_BadInput(t *testing.T) {
	lb, _ := newTestLB(t, []Instance{inst("svc", 1)})
	_, err := lb.Pick(context.Background(), "")
	assert.ErrorIs(t, err, ErrInvalidService)
	_, err = lb.Pick(context.Background(), string(make([]byte, MaxServiceNameLen+1)))
	assert.ErrorIs(t, err, ErrInvalidService)
	_, err = lb.Pick(context.Background(), "nope")
	assert.ErrorIs(t, err, ErrUnknownService)
	//lint:ignore SA1012 a nil context must not panic
	_, err = lb.Pick(nil, "svc")
	assert.NoError(t, err)
	_, err = New(nil)
	assert.Error(t, err)
	lb2, err := New(NewRegistry(), nil, WithPolicy(nil), WithGrayHeader(""), WithFilters(nil))
	require.NoError(t, err)
	require.NoError(t, lb2.Close())
	_, err = lb2.Pick(context.Background(), "svc")
	assert.ErrorIs(t, err, ErrClosed)
	_, err = New(NewRegistry(), WithRules(Rules{CanaryPercent: math.NaN()}))
	assert.ErrorIs(t, err, ErrInvalidRules)
}

func TestLoadBalancer_FollowsRegistry(t *testing.T) {
	lb, reg := newTestLB(t, []Instance{inst("svc", 1)})
	ctx := context.Background()
	g := withHeaders(ctx, "gray", "true")
	in, err := lb.Pick(g, "svc")
	require.NoError(t, err)
	assert.Equal(t, 1, in.Port, "gray falls back to prod")
	require.NoError(t, reg.Register(inst("svc", 2, "gray", "true")))
	in, err = lb.Pick(g, "svc")
	require.NoError(t, err)
	assert.Equal(t, 2, in.Port)
	require.NoError(t, reg.SetMetadata("svc", "127.0.0.1:1", "gray", "true"))
	_, err = lb.Pick(ctx, "svc")
	require.ErrorIs(t, err, ErrNoInstance, "no prod instance left")
	require.NoError(t, reg.Update("svc", "127.0.0.1:2", func(i *Instance) { i.Healthy = false }))
	require.NoError(t, reg.SetMetadata("svc", "127.0.0.1:1", "gray", "false"))
	got, err := pickedSet(t, lb, g, "svc", 5)
	require.NoError(t, err)
	assert.Equal(t, []string{"127.0.0.1:1"}, got, "an unhealthy gray instance is no gray instance")
}

func TestOddMetadataAndNames(t *testing.T) {
	big := strings.Repeat("x", 1<<16)
	odd := []map[string]string{
		nil, {}, {"": "true"}, {"gray": big}, {"GRAY": "true"}, {"gray\x00": "true"},
		{"gray": "tru\u00e9"}, {"gray": "\u0074rue"}, {"version": big}, {"gray": "true", "version": ""},
	}
	reg := NewRegistry()
	for i, md := range odd {
		require.NoError(t, reg.Register(NewInstance("svc", "127.0.0.1", 5000+i, md)))
	}
	lb, err := New(reg, WithContextHandler(testHandler), WithFilters(NewVersionFilter()), WithPolicy(WeightedRoundRobin()))
	require.NoError(t, err)
	defer lb.Close()
	for _, v := range []string{"", "true", big, "\x00", "\u0074rue"} {
		for _, ver := range []string{"", big, "v1"} {
			in, err := lb.Pick(withHeaders(context.Background(), "gray", v, "version", ver), "svc")
			require.NoError(t, err)
			if !IsGray(v) {
				assert.False(t, IsGray(in.Metadata["gray"]), "prod request on %v", in.Metadata)
			} else {
				assert.True(t, IsGray(in.Metadata["gray"]))
			}
		}
	}
	// Names: odd printable ASCII is still just a name; a space, '/' or a
	// non-ASCII byte (a bidi override among them) could break out of a URL
	// or a log line and is refused.
	require.NoError(t, reg.Register(NewInstance("DEFAULT_GROUP@@svc:and;,", "::1", 80, nil)))
	_, err = lb.Pick(context.Background(), "DEFAULT_GROUP@@svc:and;,")
	require.NoError(t, err)
	assert.ErrorIs(t, reg.Register(NewInstance("svc with spaces/and", "::1", 80, nil)), ErrInvalidService)
	assert.ErrorIs(t, reg.Register(NewInstance("svc-and\u00e9", "::1", 80, nil)), ErrInvalidService)
	assert.Equal(t, "[::1]:80", NewInstance("s", "::1", 80, nil).Addr())
}
