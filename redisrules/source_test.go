package redisrules_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/redisrules"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorder is a Watch function that keeps every rule set it is given.
type recorder struct {
	mu    sync.Mutex
	calls []graylb.Rules
	at    []time.Time // when each call came
}

func (r *recorder) fn(rl graylb.Rules) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, rl)
	r.at = append(r.at, time.Now())
}

// appliedAt returns when the first rule set that meets cond was delivered,
// waiting for it at most waitFor.
func (r *recorder) appliedAt(t testing.TB, what string, cond func(graylb.Rules) bool) time.Time {
	t.Helper()
	var at time.Time
	eventually(t, what, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for i, c := range r.calls {
			if cond(c) {
				at = r.at[i]
				return true
			}
		}
		return false
	})
	return at
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

func (r *recorder) last() (graylb.Rules, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.calls) == 0 {
		return graylb.Rules{}, false
	}
	return r.calls[len(r.calls)-1], true
}

func enabled(r graylb.Rules) bool { return r.Enabled == nil || *r.Enabled }

func TestOptionsRefused(t *testing.T) {
	_, err := redisrules.New(nil)
	assert.ErrorIs(t, err, redisrules.ErrInvalidOption)
	_, err = redisrules.NewFromOptions(nil)
	assert.ErrorIs(t, err, redisrules.ErrInvalidOption)
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	for _, opts := range [][]redisrules.Option{
		{redisrules.WithKeys("a", "b", "c"), redisrules.WithDocument("d")},
		{redisrules.WithKeys("a", "a", "c")},
		{redisrules.WithDocument("bad\nkey")},
		{redisrules.WithDocument(strings.Repeat("k", 2000))},
		{redisrules.WithNotifications(redisrules.Notifications(9))},
	} {
		_, err := redisrules.New(c, opts...)
		assert.ErrorIs(t, err, redisrules.ErrInvalidOption)
	}
	s, err := redisrules.New(c, nil, redisrules.WithLogger(nil), redisrules.WithPollInterval(-1))
	require.NoError(t, err, "nil and out-of-range options keep the defaults")
	assert.Equal(t, []string{redisrules.DefaultSwitchKey, redisrules.DefaultUsersKey, redisrules.DefaultAddressesKey}, s.Keys())
	_, err = s.Watch(nil)
	assert.ErrorIs(t, err, redisrules.ErrInvalidOption)
	require.NoError(t, s.Close())
	_, err = s.Load(ctxT(t))
	assert.ErrorIs(t, err, graylb.ErrClosed)
	_, err = s.Watch(func(graylb.Rules) {})
	assert.ErrorIs(t, err, graylb.ErrClosed)
}

func TestThreeKeysLoad(t *testing.T) {
	rc, k := shared(t)
	ctx := ctxT(t)
	src, err := redisrules.New(rc, redisrules.WithKeys(k[0], k[1], k[2]))
	require.NoError(t, err)
	defer src.Close()

	r, err := src.Load(ctx)
	require.NoError(t, err)
	assert.Equal(t, graylb.Rules{Enabled: new(bool)}, r, "no keys: gray routing off")

	require.NoError(t, rc.Set(ctx, k[0], "true", 0).Err())
	require.NoError(t, rc.RPush(ctx, k[1], "alice", "bob").Err())
	require.NoError(t, rc.RPush(ctx, k[2], "10.0.0.2", "10.0.0.3:8080").Err())
	r, err = src.Load(ctx)
	require.NoError(t, err)
	assert.True(t, *r.Enabled)
	assert.Equal(t, []string{"alice", "bob"}, r.GrayUsers)
	assert.Equal(t, []string{"10.0.0.2", "10.0.0.3:8080"}, r.GrayAddresses)

	require.NoError(t, rc.Set(ctx, k[0], "false", 0).Err())
	r, err = src.Load(ctx)
	require.NoError(t, err)
	assert.False(t, *r.Enabled)

	// A key of the wrong type is refused, naming it.
	require.NoError(t, rc.Del(ctx, k[0]).Err())
	require.NoError(t, rc.RPush(ctx, k[0], "true").Err())
	_, err = src.Load(ctx)
	require.ErrorIs(t, err, graylb.ErrInvalidRules)
	assert.Contains(t, err.Error(), k[0])
}

// A change is in force within one poll interval; unchanged data calls
// nothing; a bad address is refused once, naming the key, and the previous
// rules stay.
func TestWatchPolling(t *testing.T) {
	rc, k := shared(t)
	ctx := ctxT(t)
	log, logs := newLogger()
	const interval = 100 * time.Millisecond
	src, err := redisrules.New(rc, redisrules.WithKeys(k[0], k[1], k[2]), redisrules.WithPollInterval(interval),
		redisrules.WithNotifications(redisrules.NotifyOff), redisrules.WithLogger(log))
	require.NoError(t, err)
	defer src.Close()
	require.NoError(t, rc.Set(ctx, k[0], "true", 0).Err())
	_, err = src.Load(ctx)
	require.NoError(t, err)
	polls := countReads(rc)
	var rec recorder
	stop, err := src.Watch(rec.fn)
	require.NoError(t, err)
	defer stop()

	// Unchanged: nothing delivered over several polls.
	polls.waitPolls(t, 5)
	assert.Equal(t, 0, rec.count(), "unchanged data rebuilds nothing")
	assert.Equal(t, 1, logs.count("following changes by polling"), logs.String())

	// A change is in force within one interval (plus the round trip).
	start := time.Now()
	require.NoError(t, rc.RPush(ctx, k[1], "alice").Err())
	eventually(t, "the new user delivered", func() bool { r, ok := rec.last(); return ok && len(r.GrayUsers) == 1 })
	assert.Less(t, time.Since(start), interval+500*time.Millisecond, "one interval, and slack for a loaded machine")

	// A bad address: refused, logged once however many polls see it.
	require.NoError(t, rc.RPush(ctx, k[2], "10.0.0.9/32").Err())
	eventually(t, "the refusal logged", func() bool { return logs.count("rules refused") == 1 })
	polls.waitPolls(t, 5) // polls that must not log again
	assert.Equal(t, 1, logs.count("rules refused"), logs.String())
	assert.Equal(t, 1, logs.count(k[2]+`\": graylb: invalid rules: grayAddresses[0] \"10.0.0.9/32\"`), logs.String())
	assert.Equal(t, 1, rec.count(), "the previous rules stay")

	// Fixed: delivered; the same bad content again is logged again.
	require.NoError(t, rc.LSet(ctx, k[2], 0, "10.0.0.9").Err())
	eventually(t, "the fixed address delivered", func() bool { r, _ := rec.last(); return len(r.GrayAddresses) == 1 })
	require.NoError(t, rc.LSet(ctx, k[2], 0, "10.0.0.9/32").Err())
	eventually(t, "the refusal logged again", func() bool { return logs.count("rules refused") == 2 })

	// Switch off, then deleted: off once (deleting an "off" switch changes
	// nothing).
	require.NoError(t, rc.LSet(ctx, k[2], 0, "10.0.0.9").Err())
	require.NoError(t, rc.Set(ctx, k[0], "off", 0).Err())
	eventually(t, "switched off", func() bool { r, _ := rec.last(); return !enabled(r) })
	assert.Equal(t, 1, logs.count(`holds \"off\", neither true nor false`), logs.String())
	n := rec.count()
	require.NoError(t, rc.Del(ctx, k[0]).Err())
	polls.waitPolls(t, 3) // polls that must deliver nothing
	assert.Equal(t, n, rec.count())

	stop()
	n = rec.count()
	require.NoError(t, rc.Set(ctx, k[0], "true", 0).Err())
	// Another Watch of the source polls meanwhile: a stopped one polling
	// still would have delivered the change by the end of its polls.
	stop2, err := src.Watch(func(graylb.Rules) {})
	require.NoError(t, err)
	defer stop2()
	polls.waitPolls(t, 3)
	assert.Equal(t, n, rec.count(), "nothing after stop")
}

func TestDocumentLayout(t *testing.T) {
	rc, k := shared(t)
	ctx := ctxT(t)
	log, logs := newLogger()
	src, err := redisrules.New(rc, redisrules.WithDocument(k[0]), redisrules.WithPollInterval(50*time.Millisecond), redisrules.WithLogger(log))
	require.NoError(t, err)
	defer src.Close()

	r, err := src.Load(ctx)
	require.NoError(t, err)
	assert.Equal(t, graylb.Rules{}, r, "no document: the zero Rules")

	require.NoError(t, rc.Set(ctx, k[0], `{"grayUsers":["alice"],"canaryPercent":5}`, 0).Err())
	r, err = src.Load(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"alice"}, r.GrayUsers)
	assert.Equal(t, 5.0, r.CanaryPercent)

	var rec recorder
	stop, err := src.Watch(rec.fn)
	require.NoError(t, err)
	defer stop()
	require.NoError(t, rc.Set(ctx, k[0], `{"closed":true}`, 0).Err())
	eventually(t, "closed delivered", func() bool { r, _ := rec.last(); return r.Closed })

	// The hardened parser's refusals, each logged, the previous rules kept.
	for i, doc := range []string{`null`, `{"Closed":false}`, `{"closed":true,"closed":false}`, `{"closed":null}`,
		`{"canaryPercent":0.001}`, `{"grayAddresses":["a/b"]}`, `{} {}`, `[]`, ``} {
		require.NoError(t, rc.Set(ctx, k[0], doc, 0).Err())
		eventually(t, "refusal of "+doc, func() bool { return logs.count("rules refused") == i+1 })
		_, err := src.Load(ctx)
		require.ErrorIs(t, err, graylb.ErrInvalidRules, doc)
		assert.Contains(t, err.Error(), k[0])
	}
	assert.Equal(t, 1, rec.count(), "only valid documents delivered")

	// Removed while watching: the current rules stay.
	require.NoError(t, rc.Del(ctx, k[0]).Err())
	eventually(t, "removal logged", func() bool { return logs.count("rule document missing") == 1 })
	assert.Equal(t, 1, rec.count())

	// Larger than graylb.MaxRulesSize: refused without reading it whole.
	require.NoError(t, rc.Set(ctx, k[0], `{"grayUsers":["`+strings.Repeat("u", graylb.MaxRulesSize)+`"]}`, 0).Err())
	_, err = src.Load(ctx)
	require.ErrorIs(t, err, graylb.ErrInvalidRules)
	assert.Contains(t, err.Error(), "bytes, at most")
}

// The default cap of 100 000 entries, and the byte cap over both lists.
func TestOversizeLists(t *testing.T) {
	rc, k := shared(t)
	ctx := ctxT(t)
	src, err := redisrules.New(rc, redisrules.WithKeys(k[0], k[1], k[2]))
	require.NoError(t, err)
	defer src.Close()
	batch := make([]any, 10_000)
	for i := range batch {
		batch[i] = "u"
	}
	for i := 0; i < 10; i++ {
		require.NoError(t, rc.RPush(ctx, k[1], batch...).Err())
	}
	r, err := src.Load(ctx)
	require.NoError(t, err, "100 000 entries: at the cap")
	assert.Len(t, r.GrayUsers, redisrules.DefaultMaxEntries)
	require.NoError(t, rc.RPush(ctx, k[1], "one-more").Err())
	_, err = src.Load(ctx)
	require.ErrorIs(t, err, graylb.ErrInvalidRules)
	assert.Contains(t, err.Error(), `holds more than 100000 entries`)
	assert.Contains(t, err.Error(), k[1])

	require.NoError(t, rc.Del(ctx, k[1]).Err())
	big := strings.Repeat("x", graylb.MaxRulesSize/2)
	require.NoError(t, rc.RPush(ctx, k[1], big).Err())
	require.NoError(t, rc.RPush(ctx, k[2], "h"+big).Err())
	_, err = src.Load(ctx)
	require.ErrorIs(t, err, graylb.ErrInvalidRules)
	assert.Contains(t, err.Error(), "bytes, at most")
}

// With keyspace notifications on the server, a change is delivered at once,
// long before the poll interval.
func TestWatchNotifications(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		mode redisrules.Notifications
	}{
		{"server-enabled", []string{"--notify-keyspace-events", "KEA"}, redisrules.NotifyAuto},
		{"option-enables", nil, redisrules.NotifyEnable},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := startServer(t, c.args...)
			rc := srv.client(t)
			ctx := ctxT(t)
			log, logs := newLogger()
			src, err := redisrules.New(rc, redisrules.WithPollInterval(time.Hour), redisrules.WithNotifications(c.mode), redisrules.WithLogger(log))
			require.NoError(t, err)
			defer src.Close()
			polls := countReads(rc)
			var rec recorder
			stop, err := src.Watch(rec.fn)
			require.NoError(t, err)
			defer stop()
			eventually(t, "subscribed", func() bool { return logs.count("following changes by keyspace notifications") == 1 })
			eventually(t, "the first read delivered", func() bool { return rec.count() == 1 })

			require.NoError(t, rc.Set(ctx, redisrules.DefaultSwitchKey, "true", 0).Err())
			eventually(t, "switch on by notification", func() bool { r, _ := rec.last(); return enabled(r) })
			require.NoError(t, rc.RPush(ctx, redisrules.DefaultUsersKey, "alice").Err())
			eventually(t, "user by notification", func() bool { r, _ := rec.last(); return len(r.GrayUsers) == 1 })
			require.NoError(t, rc.RPush(ctx, redisrules.DefaultAddressesKey, "10.0.0.2").Err())
			eventually(t, "address by notification", func() bool { r, _ := rec.last(); return len(r.GrayAddresses) == 1 })
			require.NoError(t, rc.Del(ctx, redisrules.DefaultUsersKey).Err())
			eventually(t, "user removed by notification", func() bool { r, _ := rec.last(); return len(r.GrayUsers) == 0 })
			// A write that changes nothing: notified, read, not delivered
			// (a change read after it is delivered alone).
			n := rec.count()
			before := polls.n.Load()
			require.NoError(t, rc.Set(ctx, redisrules.DefaultSwitchKey, "true", 0).Err())
			require.NoError(t, rc.Set(ctx, "{graylb}:gray:other", "x", 0).Err())
			eventually(t, "the write read", func() bool { return polls.n.Load() > before })
			require.NoError(t, rc.RPush(ctx, redisrules.DefaultUsersKey, "bob").Err())
			eventually(t, "the user after it delivered", func() bool { r, _ := rec.last(); return len(r.GrayUsers) == 1 })
			assert.Equal(t, n+1, rec.count(), "a write that changed nothing was delivered")
			if c.mode == redisrules.NotifyEnable {
				m, err := rc.ConfigGet(ctx, "notify-keyspace-events").Result()
				require.NoError(t, err)
				assert.Contains(t, m["notify-keyspace-events"], "K")
			}
		})
	}
}

// NotifyAuto on a server that publishes no keyspace events polls, and
// leaves the server's setting alone.
func TestNotifyAutoLeavesServerAlone(t *testing.T) {
	rc, k := shared(t)
	log, logs := newLogger()
	src, err := redisrules.New(rc, redisrules.WithKeys(k[0], k[1], k[2]), redisrules.WithLogger(log))
	require.NoError(t, err)
	defer src.Close()
	stop, err := src.Watch(func(graylb.Rules) {})
	require.NoError(t, err)
	defer stop()
	eventually(t, "polling chosen", func() bool { return logs.count("following changes by polling") == 1 })
	assert.Contains(t, logs.String(), "publishes no keyspace events")
	m, err := rc.ConfigGet(ctxT(t), "notify-keyspace-events").Result()
	require.NoError(t, err)
	assert.Equal(t, "", m["notify-keyspace-events"])
}

// Redis unreachable at start: Load fails with ErrRedis, Watch starts all
// the same, one line for the outage, one for the recovery, and the rules
// arrive.
func TestUnreachableAtStart(t *testing.T) {
	srv := startServer(t)
	srv.kill()
	log, logs := newLogger()
	var dialed atomic.Int64
	src, err := redisrules.NewFromOptions(&redis.UniversalOptions{Addrs: []string{srv.addr()}, MaxRetries: -1, Dialer: dials(&dialed)},
		redisrules.WithPollInterval(20*time.Millisecond), redisrules.WithLogger(log))
	require.NoError(t, err)
	defer src.Close()
	_, err = src.Load(ctxT(t))
	require.ErrorIs(t, err, redisrules.ErrRedis)
	var rec recorder
	stop, err := src.Watch(rec.fn)
	require.NoError(t, err)
	defer stop()
	failed := dialed.Load()
	eventually(t, "ten failing polls", func() bool { return dialed.Load() >= failed+10 })
	assert.Equal(t, 0, logs.count("redis unavailable"), "Load's caller reported this outage:\n%s", logs.String())

	require.NoError(t, srv.start())
	require.NoError(t, srv.client(t).Set(ctxT(t), redisrules.DefaultSwitchKey, "TRUE", 0).Err())
	eventually(t, "rules delivered after recovery", func() bool { r, ok := rec.last(); return ok && enabled(r) })
	assert.Equal(t, 1, logs.count("redis reachable again"), logs.String())
}

// Credentials go to the client and nowhere else.
func TestCredentialsNeverShown(t *testing.T) {
	const secret = "s3cret-pass-Zq9"
	srv := startServer(t, "--requirepass", secret)
	log, logs := newLogger()

	good, err := redisrules.NewFromOptions(&redis.UniversalOptions{Addrs: []string{srv.addr()}, Password: secret}, redisrules.WithLogger(log))
	require.NoError(t, err)
	defer good.Close()
	_, err = good.Load(ctxT(t))
	require.NoError(t, err)

	const wrong = "wrong-pass-Xk2"
	var dialed atomic.Int64
	bad, err := redisrules.NewFromOptions(&redis.UniversalOptions{Addrs: []string{srv.addr()}, Password: wrong, MaxRetries: -1, Dialer: dials(&dialed)},
		redisrules.WithLogger(log), redisrules.WithPollInterval(20*time.Millisecond))
	require.NoError(t, err)
	defer bad.Close()
	_, loadErr := bad.Load(ctxT(t))
	require.ErrorIs(t, loadErr, redisrules.ErrRedis)
	t.Log(loadErr)
	failed := dialed.Load()
	stop, err := bad.Watch(func(graylb.Rules) {})
	require.NoError(t, err)
	eventually(t, "five failing polls", func() bool { return dialed.Load() >= failed+5 })
	stop()
	for _, s := range []string{loadErr.Error(), logs.String()} {
		assert.NotContains(t, s, secret)
		assert.NotContains(t, s, wrong)
	}
}

func TestUniversalClientSentinel(t *testing.T) {
	master := startServer(t)
	dir := t.TempDir()
	conf := dir + "/sentinel.conf"
	require.NoError(t, os.WriteFile(conf, []byte("sentinel monitor graylbtest 127.0.0.1 "+strings.TrimPrefix(master.addr(), "127.0.0.1:")+" 1\n"), 0o600))
	sentinel := startServer(t, conf, "--sentinel") // the config file comes first
	log, logs := newLogger()
	src, err := redisrules.NewFromOptions(&redis.UniversalOptions{MasterName: "graylbtest", Addrs: []string{sentinel.addr()}},
		redisrules.WithLogger(log), redisrules.WithNotifications(redisrules.NotifyEnable), redisrules.WithPollInterval(time.Hour))
	require.NoError(t, err)
	defer src.Close()
	var rec recorder
	stop, err := src.Watch(rec.fn)
	require.NoError(t, err)
	defer stop()
	eventually(t, "subscribed through the sentinel's master", func() bool {
		return logs.count("following changes by keyspace notifications") == 1
	})
	require.NoError(t, master.client(t).RPush(ctxT(t), redisrules.DefaultUsersKey, "alice").Err())
	eventually(t, "user delivered", func() bool { r, _ := rec.last(); return len(r.GrayUsers) == 1 })
}

// startSentinel starts a master, a replica of it and a Sentinel that
// monitors them as "graylbtest", the replica known to the Sentinel. The
// replica runs with replicaArgs.
func startSentinel(t *testing.T, masterArgs, replicaArgs []string) (master, replica, sentinel *server) {
	t.Helper()
	ctx := ctxT(t)
	fast := []string{"--repl-diskless-sync", "no"} // no 5 s wait before the first sync
	master = startServer(t, append(fast, masterArgs...)...)
	host, port, err := net.SplitHostPort(master.addr())
	require.NoError(t, err)
	replica = startServer(t, append(append(fast, "--replicaof", host, port), replicaArgs...)...)
	eventually(t, "the replica in sync", func() bool {
		info, err := replica.client(t).Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	})
	conf := filepath.Join(t.TempDir(), "sentinel.conf")
	require.NoError(t, os.WriteFile(conf, []byte("sentinel monitor graylbtest "+host+" "+port+" 1\n"), 0o600))
	sentinel = startServer(t, conf, "--sentinel") // the config file comes first
	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinel.addr()})
	t.Cleanup(func() { sc.Close() })
	eventually(t, "the Sentinel knows the replica", func() bool {
		rs, err := sc.Replicas(ctx, "graylbtest").Result()
		return err == nil && len(rs) == 1 && !strings.Contains(fmt.Sprint(rs), "disconnected")
	})
	return master, replica, sentinel
}

// failover has the Sentinel promote the replica and waits until the
// Sentinel announces it to clients (+switch-master) and names it.
func failover(t *testing.T, sentinel, replica *server) {
	t.Helper()
	ctx := ctxT(t)
	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinel.addr()})
	defer sc.Close()
	ps := sc.Subscribe(ctx, "+switch-master")
	defer ps.Close()
	_, err := ps.Receive(ctx) // the subscription's confirmation
	require.NoError(t, err)
	eventually(t, "the Sentinel accepts the failover", func() bool {
		err := sc.Failover(ctx, "graylbtest").Err()
		return err == nil || strings.Contains(err.Error(), "INPROG")
	})
	for {
		m, err := ps.ReceiveMessage(ctx)
		require.NoError(t, err, "waiting for +switch-master")
		if strings.HasSuffix(m.Payload, " "+strings.Replace(replica.addr(), ":", " ", 1)) {
			break
		}
	}
	addr, err := sc.GetMasterAddrByName(ctx, "graylbtest").Result()
	require.NoError(t, err)
	require.Equal(t, replica.addr(), net.JoinHostPort(addr[0], addr[1]))
}

// After a Sentinel failover, changes written to the new master arrive by
// its keyspace notifications, and the log names it. When the new master
// publishes no keyspace events, the log says changes follow by polling,
// and why, and polling keeps the rules current.
func TestSentinelFailoverNotifications(t *testing.T) {
	for _, c := range []struct {
		name     string
		replica  []string
		interval time.Duration
	}{
		{"new master publishes", []string{"--notify-keyspace-events", "KEA"}, time.Second},
		{"new master silent", nil, 50 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			const target = 100 * time.Millisecond
			master, replica, sentinel := startSentinel(t, []string{"--notify-keyspace-events", "KEA"}, c.replica)
			ctx := ctxT(t)
			log, logs := newLogger()
			src, err := redisrules.NewFromOptions(&redis.UniversalOptions{MasterName: "graylbtest", Addrs: []string{sentinel.addr()}},
				redisrules.WithLogger(log), redisrules.WithPollInterval(c.interval))
			require.NoError(t, err)
			defer src.Close()
			require.NoError(t, master.client(t).Set(ctx, redisrules.DefaultSwitchKey, "true", 0).Err())
			var rec recorder
			stop, err := src.Watch(rec.fn)
			require.NoError(t, err)
			defer stop()
			eventually(t, "notifications from the master", func() bool {
				return logs.count("following changes by keyspace notifications") == 1 && logs.count("node="+master.addr()) == 1
			})
			rec.appliedAt(t, "the first read delivered", func(graylb.Rules) bool { return true })

			failover(t, sentinel, replica)
			writer := replica.client(t)
			var took []time.Duration
			for i := 1; i <= 5; i++ {
				user := fmt.Sprintf("after-failover-%d", i)
				require.NoError(t, writer.RPush(ctx, redisrules.DefaultUsersKey, user).Err())
				written := time.Now()
				at := rec.appliedAt(t, user+" delivered", func(r graylb.Rules) bool { return slices.Contains(r.GrayUsers, user) })
				took = append(took, max(at.Sub(written), 0))
			}
			t.Logf("failover from %s to %s: changes applied in %v after the write returned", master.addr(), replica.addr(), took)
			if c.replica != nil {
				for i, d := range took {
					assert.Less(t, d, target, "change %d after the failover", i+1)
				}
				eventually(t, "the log names the new master", func() bool {
					return logs.count("following changes by keyspace notifications") == 2 && logs.count("node="+replica.addr()) == 1
				})
			} else {
				eventually(t, "polling logged, with the reason", func() bool {
					return logs.count("following changes by polling") == 1 && logs.count("node="+replica.addr()) == 1 &&
						logs.count(replica.addr()+` publishes no keyspace events for the keys (notify-keyspace-events \"\")`) == 1
				})
			}
			t.Log(logs.String())
		})
	}
}
