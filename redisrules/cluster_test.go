package redisrules_test

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/graylb/graylb/redisrules"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startCluster starts a 3-master Redis Cluster (no replicas) and returns
// its node addresses.
func startCluster(t *testing.T, args ...string) []string {
	t.Helper()
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip("redis-cli is not installed (the Debian package redis-tools); skipping the Cluster test")
	}
	var addrs []string
	for i := 0; i < 3; i++ {
		s := startServer(t, append([]string{"--cluster-enabled", "yes", "--cluster-node-timeout", "2000"}, args...)...)
		addrs = append(addrs, s.addr())
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
	return addrs
}

// One Cluster for both layouts of keys: the default names (one hash tag:
// one transaction, notifications from the slot's master) and names in
// three slots (a pipeline across nodes, polling).
func TestUniversalClientCluster(t *testing.T) {
	start := time.Now()
	addrs := startCluster(t, "--notify-keyspace-events", "KEA")
	t.Logf("cluster up in %v", time.Since(start))
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
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
