package redisrules_test

import (
	"context"
	"fmt"
	"net"
	"os/exec"
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

// startCluster starts a 3-master Redis Cluster (no replicas) and returns
// its node addresses.
func startCluster(t *testing.T, args ...string) []string {
	t.Helper()
	addrs, _ := startClusterServers(t, args...)
	return addrs
}

// startClusterServers is startCluster, returning the servers too.
func startClusterServers(t *testing.T, args ...string) ([]string, []*server) {
	t.Helper()
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip("redis-cli is not installed (the Debian package redis-tools); skipping the Cluster test")
	}
	var addrs []string
	var servers []*server
	for i := 0; i < 3; i++ {
		s := startServer(t, append([]string{"--cluster-enabled", "yes", "--cluster-node-timeout", "2000"}, args...)...)
		addrs = append(addrs, s.addr())
		servers = append(servers, s)
	}
	cmd := exec.Command("redis-cli", append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "0", "--cluster-yes")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("creating the cluster: %v\n%s", err, out)
	}
	for _, a := range addrs {
		c := newClient(t, a)
		eventually(t, "cluster state ok on "+a, func() bool {
			info, err := c.ClusterInfo(ctxT(t)).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok")
		})
	}
	return addrs, servers
}

// One Cluster for both layouts of keys: the default names (one hash tag:
// one transaction, notifications from the slot's master) and names in
// three slots (a pipeline across nodes, polling).
func TestUniversalClientCluster(t *testing.T) {
	start := time.Now()
	addrs := startCluster(t, "--notify-keyspace-events", "KEA")
	t.Logf("cluster up in %v", time.Since(start))
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: slices.Clone(addrs)})
	defer cc.Close()
	ctx := ctxT(t)

	t.Run("hash-tagged keys, notifications", func(t *testing.T) {
		log, logs := newLogger()
		src, err := redisrules.New(cc, redisrules.WithPollInterval(time.Hour), redisrules.WithLogger(log))
		require.NoError(t, err)
		defer src.Close()
		require.NoError(t, cc.Set(ctx, redisrules.DefaultSwitchKey, "true", 0).Err())
		r, err := src.Load(ctx)
		require.NoError(t, err)
		assert.True(t, enabled(r))
		var rec recorder
		stop, err := src.Watch(rec.fn)
		require.NoError(t, err)
		defer stop()
		eventually(t, "subscribed on the slot's master", func() bool {
			return logs.count("following changes by keyspace notifications") == 1
		})
		require.NoError(t, cc.RPush(ctx, redisrules.DefaultUsersKey, "alice").Err())
		require.NoError(t, cc.RPush(ctx, redisrules.DefaultAddressesKey, "10.0.0.2").Err())
		eventually(t, "lists delivered by notification", func() bool {
			r, _ := rec.last()
			return len(r.GrayUsers) == 1 && len(r.GrayAddresses) == 1
		})
	})

	t.Run("keys in three slots, polling", func(t *testing.T) {
		keys := []string{"gray:switch", "gray:users", "gray:addresses"}
		log, logs := newLogger()
		src, err := redisrules.New(cc, redisrules.WithKeys(keys[0], keys[1], keys[2]),
			redisrules.WithPollInterval(20*time.Millisecond), redisrules.WithLogger(log))
		require.NoError(t, err)
		defer src.Close()
		var rec recorder
		stop, err := src.Watch(rec.fn)
		require.NoError(t, err)
		defer stop()
		eventually(t, "polling chosen", func() bool { return logs.count("keys in different hash slots") == 1 })
		require.NoError(t, cc.Set(ctx, keys[0], "true", 0).Err())
		require.NoError(t, cc.RPush(ctx, keys[1], "bob").Err())
		require.NoError(t, cc.RPush(ctx, keys[2], "gray-host").Err())
		eventually(t, "all three keys read across nodes", func() bool {
			r, _ := rec.last()
			return enabled(r) && len(r.GrayUsers) == 1 && len(r.GrayAddresses) == 1
		})
		require.NoError(t, cc.RPush(ctx, keys[2], "bad/host").Err())
		eventually(t, "refused", func() bool { return logs.count("rules refused") == 1 })
		r, _ := rec.last()
		assert.Equal(t, []string{"gray-host"}, r.GrayAddresses, "the previous rules stay")
	})
}

// slotOwner returns the address of the master that serves slot, as the
// node at addr sees it.
func slotOwner(t *testing.T, addr string, slot int) string {
	t.Helper()
	slots, err := newClient(t, addr).ClusterSlots(ctxT(t)).Result()
	require.NoError(t, err)
	for _, s := range slots {
		if s.Start <= slot && slot <= s.End && len(s.Nodes) > 0 {
			return s.Nodes[0].Addr
		}
	}
	t.Fatalf("no node serves slot %d", slot)
	return ""
}

// migrateSlot moves slot from one master to another as redis-cli --cluster
// reshard does: IMPORTING on the target, MIGRATING on the source, MIGRATE
// of the slot's keys, then SETSLOT NODE on the target, the source and the
// other masters. Functions in during run after the keys moved and before
// the slot did: the target then serves the keys to clients that ask it
// (ASK redirections).
func migrateSlot(t *testing.T, masters []string, slot int, from, to string, during ...func()) {
	t.Helper()
	ctx := ctxT(t)
	id := func(addr string) string {
		id, err := newClient(t, addr).Do(ctx, "CLUSTER", "MYID").Text()
		require.NoError(t, err)
		return id
	}
	fromID, toID := id(from), id(to)
	fc, tc := newClient(t, from), newClient(t, to)
	require.NoError(t, tc.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", fromID).Err())
	require.NoError(t, fc.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", toID).Err())
	keys, err := fc.ClusterGetKeysInSlot(ctx, slot, 1000).Result()
	require.NoError(t, err)
	if len(keys) > 0 {
		host, port, err := net.SplitHostPort(to)
		require.NoError(t, err)
		args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		require.NoError(t, fc.Do(ctx, args...).Err())
	}
	for _, f := range during {
		f()
	}
	order := []string{to, from}
	for _, m := range masters {
		if m != to && m != from {
			order = append(order, m)
		}
	}
	for _, m := range order {
		require.NoError(t, newClient(t, m).Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", toID).Err(), "SETSLOT NODE on %s", m)
	}
	for _, m := range masters {
		assert.Equal(t, to, slotOwner(t, m, slot), "node %s sees the slot on its new master", m)
	}
}

// After the rules' slot moves to another master, changes still arrive by
// keyspace notification, in well under a poll interval: the subscription
// follows the slot. Before, it stayed on the old master, which publishes
// nothing for keys it no longer holds, and every change waited for a poll
// (about 0.5-1 s at the default interval) while the log still said
// notifications. Each change is written by another client (another
// process, in production), right after the migration.
func TestClusterNotificationsFollowSlotMigration(t *testing.T) {
	const target = 100 * time.Millisecond
	masters := startCluster(t, "--notify-keyspace-events", "KEA")
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: slices.Clone(masters)})
	defer cc.Close()
	writer := redis.NewClusterClient(&redis.ClusterOptions{Addrs: slices.Clone(masters)})
	defer writer.Close()
	ctx := ctxT(t)
	log, logs := newLogger()
	src, err := redisrules.New(cc, redisrules.WithLogger(log)) // the default poll interval
	require.NoError(t, err)
	defer src.Close()
	require.NoError(t, writer.Set(ctx, redisrules.DefaultSwitchKey, "true", 0).Err())
	var rec recorder
	stop, err := src.Watch(rec.fn)
	require.NoError(t, err)
	defer stop()
	eventually(t, "subscribed", func() bool { return logs.count("following changes by keyspace notifications") == 1 })
	rec.appliedAt(t, "the first read delivered", func(graylb.Rules) bool { return true })

	// change adds a gray user and returns how long it took to apply,
	// from the moment the write returned (the writer's own redirects are
	// not the watcher's), and from the moment it was sent.
	change := func(user string) (applied, sent time.Duration) {
		start := time.Now()
		require.NoError(t, writer.RPush(ctx, redisrules.DefaultUsersKey, user).Err())
		written := time.Now()
		at := rec.appliedAt(t, user+" delivered", func(r graylb.Rules) bool { return slices.Contains(r.GrayUsers, user) })
		return max(at.Sub(written), 0), at.Sub(start)
	}
	d, _ := change("before")
	t.Logf("before any migration: applied in %v", d)
	assert.Less(t, d, target)

	// Two hops: to a second master, then to the third (never back to one
	// the slot was on).
	slot := int(writer.ClusterKeySlot(ctx, redisrules.DefaultSwitchKey).Val())
	visited := []string{slotOwner(t, masters[0], slot)}
	for hop := 1; hop <= 2; hop++ {
		from := visited[len(visited)-1]
		var to string
		for _, m := range masters {
			if !slices.Contains(visited, m) {
				to = m
				break
			}
		}
		visited = append(visited, to)
		// A change made mid-migration (the write is redirected to the
		// target, ASK) applies once the migration ends: the watcher's
		// transaction cannot be redirected by ASK (go-redis), so its reads
		// fail until then. The migration ends after a read failed.
		mid := fmt.Sprintf("hop%d-migrating", hop)
		migrateSlot(t, masters, slot, from, to, func() {
			require.NoError(t, writer.RPush(ctx, redisrules.DefaultUsersKey, mid).Err())
			eventually(t, "the watcher's read failed", func() bool { return logs.count("redis unavailable") == hop })
		})
		migrated := time.Now()
		at := rec.appliedAt(t, mid+" delivered", func(r graylb.Rules) bool { return slices.Contains(r.GrayUsers, mid) })
		took := []time.Duration{max(at.Sub(migrated), 0)}
		sent := []time.Duration{0}
		for i := 1; i <= 5; i++ {
			a, s := change(fmt.Sprintf("hop%d-user%d", hop, i))
			took, sent = append(took, a), append(sent, s)
		}
		t.Logf("slot %d moved from %s to %s: the change made while it migrated applied %v after the migration ended; the five after it %v after the write returned (%v after it was sent)", slot, from, to, took[0], took[1:], sent[1:])
		for i, d := range took {
			assert.Less(t, d, target, "change %d of migration %d (0: made while migrating)", i, hop)
		}
		eventually(t, "the log names the new master", func() bool {
			return logs.count("following changes by keyspace notifications") > hop && logs.count("node="+to) > 0
		})
	}
	t.Log(logs.String())
}

// A master that publishes no keyspace events gets the rules' slot: the log
// says changes follow by polling there, and why; polling keeps the rules
// current. Moved on to a master that publishes them, notifications again.
func TestClusterSlotMovesToNodeWithoutNotifications(t *testing.T) {
	const interval = 50 * time.Millisecond
	masters := startCluster(t, "--notify-keyspace-events", "KEA")
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: slices.Clone(masters)})
	defer cc.Close()
	writer := redis.NewClusterClient(&redis.ClusterOptions{Addrs: slices.Clone(masters)})
	defer writer.Close()
	ctx := ctxT(t)
	slot := int(writer.ClusterKeySlot(ctx, redisrules.DefaultSwitchKey).Val())
	first := slotOwner(t, masters[0], slot)
	var silent, last string // a master without notifications, and the third
	for _, m := range masters {
		switch {
		case m == first:
		case silent == "":
			silent = m
		default:
			last = m
		}
	}
	require.NoError(t, newClient(t, silent).ConfigSet(ctx, "notify-keyspace-events", "").Err())
	require.NoError(t, writer.Set(ctx, redisrules.DefaultSwitchKey, "true", 0).Err())

	log, logs := newLogger()
	src, err := redisrules.New(cc, redisrules.WithLogger(log), redisrules.WithPollInterval(interval))
	require.NoError(t, err)
	defer src.Close()
	var rec recorder
	stop, err := src.Watch(rec.fn)
	require.NoError(t, err)
	defer stop()
	eventually(t, "notifications from the slot's master", func() bool {
		return logs.count("following changes by keyspace notifications") == 1 && logs.count("node="+first) == 1
	})
	assert.NotContains(t, logs.String(), "subscribed="+silent, "a master that publishes nothing is not subscribed to")

	applies := func(user string) {
		t.Helper()
		require.NoError(t, writer.RPush(ctx, redisrules.DefaultUsersKey, user).Err())
		rec.appliedAt(t, user+" delivered", func(r graylb.Rules) bool { return slices.Contains(r.GrayUsers, user) })
	}
	migrateSlot(t, masters, slot, first, silent)
	applies("on-the-silent-master")
	eventually(t, "polling logged, with the reason", func() bool {
		return logs.count("following changes by polling") == 1 && logs.count("node="+silent+" ") == 1 &&
			logs.count(silent+` publishes no keyspace events for the keys (notify-keyspace-events \"\")`) == 1
	})
	for i := 0; i < 3; i++ {
		applies(fmt.Sprintf("polled-%d", i))
	}

	migrateSlot(t, masters, slot, silent, last)
	applies("on-the-last-master")
	eventually(t, "notifications logged again", func() bool {
		return logs.count("following changes by keyspace notifications") == 2 && logs.count("node="+last) == 1
	})
	start := time.Now()
	applies("notified")
	assert.Less(t, time.Since(start), interval, "by notification, not the next poll")
	t.Log(logs.String())
}

// nodeID returns the Cluster node ID of the node at addr.
func nodeID(t *testing.T, addr string) string {
	t.Helper()
	id, err := newClient(t, addr).Do(ctxT(t), "CLUSTER", "MYID").Text()
	require.NoError(t, err)
	return id
}

// addReplica starts a node, joins it to the cluster of masters as a
// replica of master, and returns its address once it is in sync and every
// master lists it.
func addReplica(t *testing.T, masters []string, master string, args ...string) string {
	t.Helper()
	ctx := ctxT(t)
	s := startServer(t, append([]string{"--cluster-enabled", "yes", "--cluster-node-timeout", "2000"}, args...)...)
	rc := s.client(t)
	host, port, err := net.SplitHostPort(master)
	require.NoError(t, err)
	require.NoError(t, rc.ClusterMeet(ctx, host, port).Err())
	id := nodeID(t, master)
	eventually(t, "the new node knows the master", func() bool {
		nodes, err := rc.ClusterNodes(ctx).Result()
		return err == nil && strings.Contains(nodes, id)
	})
	require.NoError(t, rc.ClusterReplicate(ctx, id).Err())
	eventually(t, "the replica in sync", func() bool {
		info, err := rc.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	})
	mine := nodeID(t, s.addr())
	for _, m := range masters {
		mc := newClient(t, m)
		eventually(t, m+" lists the replica", func() bool {
			nodes, err := mc.ClusterNodes(ctx).Result()
			for _, l := range strings.Split(nodes, "\n") {
				if err == nil && strings.HasPrefix(l, mine+" ") && strings.Contains(l, "slave "+id) {
					return true
				}
			}
			return false
		})
	}
	return s.addr()
}

// How the rules' master fails over, in testClusterFailover.
const (
	failoverManual   = iota // CLUSTER FAILOVER on the replica
	failoverKilled          // the master killed; the replica takes over after the node timeout
	failoverTakeover        // the master killed; the replica takes over at once (CLUSTER FAILOVER TAKEOVER)
)

// After a failover of the rules' master, changes arrive by notification
// from the new master at once: each change made once every live node
// names the replica as the slot's master (the promotion, as the cluster
// reports it) applies within the target of its write. "manual": CLUSTER
// FAILOVER on its replica (the replica becomes the master of the slot, the
// old master its replica). "master killed": the master is killed, and its
// replica takes over after the node timeout (2 s here). "master killed,
// immediate takeover": the replica takes over right after the kill, while
// the watcher's first read after its subscription broke still goes to the
// dead master.
//
// The last two failed before (the first change applied about 3 s after its
// write: in every run for the immediate takeover, in about 1 of 15 runs
// under load after the node timeout): the watcher read through the
// client's slot map, which still named the dead master, and go-redis
// v9.0.0's Cluster transaction, retried after the connection was refused,
// sends its MULTI and EXEC alone to a random live master and waits for a
// reply that never comes, for the client's read timeout (3 s by default),
// not the watcher's. The read that came after the subscription broke, or
// after a setup that read a slot map from a node not yet aware of the
// promotion, was such a read.
func TestClusterNotificationsFollowFailover(t *testing.T) {
	for _, tc := range []struct {
		name string
		how  int
	}{
		{"manual", failoverManual},
		{"master killed", failoverKilled},
		{"master killed, immediate takeover", failoverTakeover},
	} {
		t.Run(tc.name, func(t *testing.T) { testClusterFailover(t, tc.how) })
	}
}

func testClusterFailover(t *testing.T, how int) {
	const target = 100 * time.Millisecond
	masters, servers := startClusterServers(t, "--notify-keyspace-events", "KEA")
	ctx := ctxT(t)
	probe := redis.NewClusterClient(&redis.ClusterOptions{Addrs: slices.Clone(masters)})
	defer probe.Close()
	slot := int(probe.ClusterKeySlot(ctx, redisrules.DefaultSwitchKey).Val())
	old := slotOwner(t, masters[0], slot)
	replica := addReplica(t, masters, old, "--notify-keyspace-events", "KEA")

	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: slices.Clone(masters)})
	defer cc.Close()
	writer := redis.NewClusterClient(&redis.ClusterOptions{Addrs: slices.Clone(masters)})
	defer writer.Close()
	log, logs := newLogger()
	src, err := redisrules.New(cc, redisrules.WithLogger(log)) // the default poll interval
	require.NoError(t, err)
	defer src.Close()
	require.NoError(t, writer.Set(ctx, redisrules.DefaultSwitchKey, "true", 0).Err())
	var rec recorder
	stop, err := src.Watch(rec.fn)
	require.NoError(t, err)
	defer stop()
	eventually(t, "subscribed", func() bool { return logs.count("following changes by keyspace notifications") == 1 })
	rec.appliedAt(t, "the first read delivered", func(graylb.Rules) bool { return true })

	alive := append([]string{replica}, masters...)
	if how == failoverManual {
		require.NoError(t, newClient(t, replica).Do(ctx, "CLUSTER", "FAILOVER").Err())
	} else {
		alive = []string{replica}
		for i, m := range masters {
			if m == old {
				servers[i].kill()
			} else {
				alive = append(alive, m)
			}
		}
		if how == failoverTakeover {
			require.NoError(t, newClient(t, replica).Do(ctx, "CLUSTER", "FAILOVER", "TAKEOVER").Err())
		}
	}
	for _, m := range alive {
		eventually(t, m+" sees the replica as the slot's master", func() bool { return slotOwner(t, m, slot) == replica })
	}

	// The changes come from a client that knows the new topology (another
	// process's: the watcher's client learns it by itself).
	writer = redis.NewClusterClient(&redis.ClusterOptions{Addrs: slices.Clone(alive)})
	defer writer.Close()
	ctx = ctxT(t) // the failover took some of the first one
	var took []time.Duration
	for i := 1; i <= 5; i++ {
		user := fmt.Sprintf("after-failover-%d", i)
		require.NoError(t, writer.RPush(ctx, redisrules.DefaultUsersKey, user).Err())
		written := time.Now()
		at := rec.appliedAt(t, user+" delivered", func(r graylb.Rules) bool { return slices.Contains(r.GrayUsers, user) })
		took = append(took, max(at.Sub(written), 0))
	}
	t.Logf("failover from %s to %s: changes applied in %v after the write returned", old, replica, took)
	for i, d := range took {
		assert.Less(t, d, target, "change %d after the failover", i+1)
	}
	eventually(t, "the log names the new master", func() bool { return logs.count("node="+replica) > 0 })
	t.Log(logs.String())
}

// addMaster starts a node and joins it to the cluster of masters, as a
// master without slots, and returns its address once every master knows it.
func addMaster(t *testing.T, masters []string, args ...string) string {
	t.Helper()
	ctx := ctxT(t)
	s := startServer(t, append([]string{"--cluster-enabled", "yes", "--cluster-node-timeout", "2000"}, args...)...)
	host, port, err := net.SplitHostPort(masters[0])
	require.NoError(t, err)
	require.NoError(t, s.client(t).ClusterMeet(ctx, host, port).Err())
	id := nodeID(t, s.addr())
	for _, m := range masters {
		mc := newClient(t, m)
		eventually(t, m+" knows the new master", func() bool {
			nodes, err := mc.ClusterNodes(ctx).Result()
			return err == nil && strings.Contains(nodes, id+" "+s.addr())
		})
	}
	eventually(t, "cluster state ok on the new master", func() bool {
		info, err := s.client(t).ClusterInfo(ctx).Result()
		return err == nil && strings.Contains(info, "cluster_state:ok")
	})
	return s.addr()
}

// The rules' slot moves to a master that joined the cluster after the
// watcher subscribed (resharding onto a new node): its notifications are
// followed from the first change after the migration. Each change applies
// by notification, well before a poll, and no poll finds a change a
// notification did not announce.
//
// "late read, late slot map": as on a loaded machine, the read that
// MIGRATE's deletion on the old master prompts comes after the first
// change was written on the new master, and the watcher's client reads its
// slot map from a node that learns of the migration's end only after that
// change applied (go-redis reads it from a random node). The poll interval
// is an hour: nothing but notifications applies a change. Before, the
// watcher looked at the slot map after that read only when it found the
// content unchanged; this one found the first change, the watcher stayed
// on the old masters, and the second change waited for a poll (here: for
// ever; at the default interval about 950 ms, in 3 of 54 runs of the
// first case under load).
func TestClusterNotificationsFollowSlotToNewMaster(t *testing.T) {
	for _, held := range []bool{false, true} {
		name := "read after the migration"
		if held {
			name = "late read, late slot map"
		}
		t.Run(name, func(t *testing.T) { testSlotToNewMaster(t, held) })
	}
}

// readGate holds a client's pipelines and transactions while it is shut.
type readGate struct {
	mu   sync.Mutex
	shut chan struct{} // nil while open
}

func (g *readGate) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (g *readGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (g *readGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		g.mu.Lock()
		shut := g.shut
		g.mu.Unlock()
		if shut != nil {
			select {
			case <-shut:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return next(ctx, cmds)
	}
}

func (g *readGate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.shut = make(chan struct{})
}

func (g *readGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut != nil {
		close(g.shut)
		g.shut = nil
	}
}

func testSlotToNewMaster(t *testing.T, held bool) {
	const target = 300 * time.Millisecond // a notification's, on a loaded machine; a poll's is up to the interval
	interval := redisrules.DefaultPollInterval
	if held {
		interval = time.Hour
	}
	masters := startCluster(t, "--notify-keyspace-events", "KEA")
	opts := &redis.ClusterOptions{Addrs: slices.Clone(masters)}
	var frozen atomic.Pointer[[]redis.ClusterSlot] // the slot map served while set
	if held {
		viewer := newClient(t, masters[0])
		opts.ClusterSlots = func(ctx context.Context) ([]redis.ClusterSlot, error) {
			if f := frozen.Load(); f != nil {
				return *f, nil
			}
			return viewer.ClusterSlots(ctx).Result()
		}
	}
	cc := redis.NewClusterClient(opts)
	defer cc.Close()
	gate := &readGate{}
	defer gate.open()
	cc.AddHook(gate) // before the watcher uses cc: AddHook is not safe beside commands
	writer := redis.NewClusterClient(&redis.ClusterOptions{Addrs: slices.Clone(masters)})
	defer writer.Close()
	ctx := ctxT(t)
	log, logs := newLogger()
	src, err := redisrules.New(cc, redisrules.WithLogger(log), redisrules.WithPollInterval(interval))
	require.NoError(t, err)
	defer src.Close()
	require.NoError(t, writer.Set(ctx, redisrules.DefaultSwitchKey, "true", 0).Err())
	var rec recorder
	stop, err := src.Watch(rec.fn)
	require.NoError(t, err)
	defer stop()
	eventually(t, "subscribed", func() bool { return logs.count("following changes by keyspace notifications") == 1 })
	rec.appliedAt(t, "the first read delivered", func(graylb.Rules) bool { return true })

	added := addMaster(t, masters, "--notify-keyspace-events", "KEA")
	slot := int(writer.ClusterKeySlot(ctx, redisrules.DefaultSwitchKey).Val())
	all := append(slices.Clone(masters), added)
	if held {
		before, err := newClient(t, masters[0]).ClusterSlots(ctx).Result()
		require.NoError(t, err)
		frozen.Store(&before)
		gate.close()
	}
	migrateSlot(t, all, slot, slotOwner(t, masters[0], slot), added)
	var took []time.Duration
	for i := 1; i <= 5; i++ {
		user := fmt.Sprintf("on-the-new-master-%d", i)
		require.NoError(t, writer.RPush(ctx, redisrules.DefaultUsersKey, user).Err())
		written := time.Now()
		gate.open()
		at := rec.appliedAt(t, user+" delivered", func(r graylb.Rules) bool { return slices.Contains(r.GrayUsers, user) })
		took = append(took, max(at.Sub(written), 0))
		frozen.Store(nil) // the node the map comes from learns of the migration's end
	}
	t.Logf("slot %d moved to the new master %s: changes applied in %v after the write returned", slot, added, took)
	for i, d := range took {
		assert.Less(t, d, target, "change %d after the migration", i+1)
	}
	assert.Zero(t, logs.count("a poll found a change no keyspace notification announced"), "every change came by notification")
	// The last mode line: notifications, from the new master, which is
	// among the masters subscribed to.
	var mode string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "redisrules: following changes by") {
			mode = l
		}
	}
	assert.Contains(t, mode, "following changes by keyspace notifications")
	assert.Contains(t, mode, "node="+added+" ")
	_, subscribed, _ := strings.Cut(mode, "subscribed=")
	subscribed, _, _ = strings.Cut(subscribed, " ")
	assert.Contains(t, strings.Split(subscribed, ","), added, "the new master subscribed to")
	t.Log(logs.String())
}
