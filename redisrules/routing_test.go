package redisrules_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/graylb/graylb/redisrules"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	prodAddr = "10.0.0.1:80"
	grayAddr = "10.0.0.2:80"
)

// picker runs picks for alice and bob until stopped, counting failures and
// remembering the last instance each got.
type picker struct {
	lb       *graylb.LoadBalancer
	failures atomic.Int64
	picks    atomic.Int64
	last     sync.Map // user -> address
	stop     chan struct{}
	wg       sync.WaitGroup
}

func startPicks(t *testing.T, lb *graylb.LoadBalancer) *picker {
	p := &picker{lb: lb, stop: make(chan struct{})}
	for _, user := range []string{"alice", "bob"} {
		// The user id comes from the program (the authenticated user),
		// not from a header a caller could set.
		ctx := graylb.WithValue(context.Background(), graylb.DefaultUserHeader, user)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for {
				select {
				case <-p.stop:
					return
				default:
				}
				in, err := lb.Pick(ctx, "svc")
				p.picks.Add(1)
				if err != nil {
					p.failures.Add(1)
					continue
				}
				p.last.Store(user, in.Addr())
				runtime.Gosched() // the source's reads and the test's checks run between picks
			}
		}()
	}
	t.Cleanup(p.close)
	return p
}

func (p *picker) close() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	p.wg.Wait()
}

// goes reports whether user's picks now land on addr (a few fresh picks
// agree).
func (p *picker) goes(user, addr string) bool {
	ctx := graylb.WithValue(context.Background(), graylb.DefaultUserHeader, user)
	for i := 0; i < 4; i++ {
		in, err := p.lb.Pick(ctx, "svc")
		if err != nil || in.Addr() != addr {
			return false
		}
	}
	return true
}

func newBalancer(t *testing.T, src graylb.RuleSource, opts ...graylb.Option) *graylb.LoadBalancer {
	reg := graylb.NewRegistry()
	require.NoError(t, reg.Register(graylb.NewInstance("svc", "10.0.0.1", 80, nil)))
	require.NoError(t, reg.Register(graylb.NewInstance("svc", "10.0.0.2", 80, nil))) // gray by address only
	lb, err := graylb.New(reg, append([]graylb.Option{graylb.WithRuleSource(src)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { lb.Close() })
	return lb
}

// Operating a release by writing the keys, while picks run: switch on, a
// user and an address added and removed, switch off. No pick fails.
func TestReleaseWhilePicking(t *testing.T) {
	rc, k := shared(t)
	ctx := ctxT(t)
	src, err := redisrules.New(rc, redisrules.WithKeys(k[0], k[1], k[2]), redisrules.WithPollInterval(20*time.Millisecond))
	require.NoError(t, err)
	defer src.Close()
	lb := newBalancer(t, src)
	p := startPicks(t, lb)

	// Gray routing off (no switch): every instance serves every request.
	eventually(t, "bob reaches both instances", func() bool { return p.goesEither("bob") })

	require.NoError(t, rc.RPush(ctx, k[2], "10.0.0.2").Err())
	require.NoError(t, rc.Set(ctx, k[0], "true", 0).Err())
	eventually(t, "alice on prod (not a gray user yet)", func() bool { return p.goes("alice", prodAddr) })
	require.NoError(t, rc.RPush(ctx, k[1], "alice").Err())
	eventually(t, "alice on the gray address", func() bool { return p.goes("alice", grayAddr) })
	assert.True(t, p.goes("bob", prodAddr), "bob stays on prod")

	require.NoError(t, rc.LRem(ctx, k[1], 0, "alice").Err())
	eventually(t, "alice back on prod", func() bool { return p.goes("alice", prodAddr) })

	require.NoError(t, rc.RPush(ctx, k[1], "alice").Err())
	eventually(t, "alice gray again", func() bool { return p.goes("alice", grayAddr) })
	require.NoError(t, rc.LRem(ctx, k[2], 0, "10.0.0.2").Err())
	eventually(t, "10.0.0.2 no longer gray: alice, a gray user with no gray instance, falls back to prod, now both instances",
		func() bool { return p.goesEither("alice") })

	require.NoError(t, rc.Set(ctx, k[0], "false", 0).Err())
	eventually(t, "switch off: bob reaches both", func() bool { return p.goesEither("bob") })

	p.close()
	assert.Zero(t, p.failures.Load(), "failed picks out of %d", p.picks.Load())
}

// goesEither reports whether user's picks reach both instances.
func (p *picker) goesEither(user string) bool {
	ctx := graylb.WithValue(context.Background(), graylb.DefaultUserHeader, user)
	seen := map[string]bool{}
	for i := 0; i < 8; i++ {
		if in, err := p.lb.Pick(ctx, "svc"); err == nil {
			seen[in.Addr()] = true
		}
	}
	return seen[prodAddr] && seen[grayAddr]
}

// Redis killed and restarted under load: no pick fails, the rules stay,
// one log line for the outage and one for the recovery, and the unchanged
// rules after the restart rebuild nothing.
func TestRedisKilledUnderLoad(t *testing.T) {
	srv := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
	rc := srv.client(t)
	ctx := ctxT(t)
	require.NoError(t, rc.Set(ctx, redisrules.DefaultSwitchKey, "true", 0).Err())
	require.NoError(t, rc.RPush(ctx, redisrules.DefaultUsersKey, "alice").Err())
	require.NoError(t, rc.RPush(ctx, redisrules.DefaultAddressesKey, "10.0.0.2").Err())

	log, logs := newLogger()
	src, err := redisrules.NewFromOptions(&redis.UniversalOptions{Addrs: []string{srv.addr()}, MaxRetries: -1, DialTimeout: 200 * time.Millisecond},
		redisrules.WithPollInterval(20*time.Millisecond), redisrules.WithTimeout(200*time.Millisecond), redisrules.WithLogger(log))
	require.NoError(t, err)
	defer src.Close()
	lb := newBalancer(t, src, graylb.WithLogger(log))
	var changes atomic.Int64
	defer adapter.For(lb).OnRulesChange(func() { changes.Add(1) })()
	p := startPicks(t, lb)
	eventually(t, "alice gray", func() bool { return p.goes("alice", grayAddr) })

	for round := 1; round <= 2; round++ {
		srv.kill()
		eventually(t, "outage logged", func() bool { return logs.count("redis unavailable") == round })
		before := p.picks.Load()
		eventually(t, "picks go on during the outage", func() bool { return p.picks.Load() > before+100 })
		assert.True(t, p.goes("alice", grayAddr), "the rules stay during the outage")
		assert.True(t, p.goes("bob", prodAddr))

		require.NoError(t, srv.start())
		eventually(t, "recovery logged", func() bool { return logs.count("redis reachable again") == round })
		assert.True(t, p.goes("alice", grayAddr))
	}
	p.close()
	assert.Zero(t, p.failures.Load(), "failed picks out of %d", p.picks.Load())
	assert.Equal(t, 2, logs.count("redis unavailable"), "one line per outage:\n%s", logs.String())
	assert.Zero(t, changes.Load(), "unchanged rules after a restart rebuild nothing")
}
