package redisrules_test

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/redisrules"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// The rules' source is shown as an operator finds it: the layout, its keys
// and the Redis address; never a credential. Before, the debug page showed
// the Go type *redisrules.RuleSource. Nothing listens at these addresses:
// the description does not need Redis.
func TestRuleSourceDescribesItself(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	common := []redisrules.Option{redisrules.WithNotifications(redisrules.NotifyOff), redisrules.WithLogger(quiet),
		redisrules.WithTimeout(50 * time.Millisecond), redisrules.WithPollInterval(time.Hour)}
	single := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", Username: "app", Password: "s3cret-pw"})
	defer single.Close()
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1", "127.0.0.2:1"}, Password: "s3cret-pw"})
	defer cluster.Close()
	failover := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "mymaster", SentinelAddrs: []string{"127.0.0.1:1"}, Password: "s3cret-pw"})
	defer failover.Close()
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"b": "127.0.0.2:1", "a": "127.0.0.1:1"}, Password: "s3cret-pw"})
	defer ring.Close()
	for _, tc := range []struct {
		name string
		new  func() (*redisrules.RuleSource, error)
		want string
	}{
		{"three keys, default names", func() (*redisrules.RuleSource, error) { return redisrules.New(single, common...) },
			"redis keys switch {graylb}:gray:switch, users {graylb}:gray:users, addresses {graylb}:gray:addresses @ 127.0.0.1:1"},
		{"a document", func() (*redisrules.RuleSource, error) {
			return redisrules.New(single, append(common, redisrules.WithDocument("app:rules"))...)
		}, "redis document app:rules @ 127.0.0.1:1"},
		{"a cluster", func() (*redisrules.RuleSource, error) {
			return redisrules.New(cluster, append(common, redisrules.WithDocument("{app}:rules"))...)
		}, "redis document {app}:rules @ cluster 127.0.0.1:1,127.0.0.2:1"},
		{"a failover client", func() (*redisrules.RuleSource, error) {
			return redisrules.New(failover, append(common, redisrules.WithDocument(""))...)
		}, "redis document {graylb}:rules @ a Sentinel failover client"},
		{"a ring", func() (*redisrules.RuleSource, error) {
			return redisrules.New(ring, append(common, redisrules.WithDocument("d"))...)
		}, "redis document d @ ring 127.0.0.1:1,127.0.0.2:1"},
		{"options: one address, credentials in the URL form too", func() (*redisrules.RuleSource, error) {
			return redisrules.NewFromOptions(&redis.UniversalOptions{Addrs: []string{"user:s3cret-pw@127.0.0.1:1"}, Username: "app", Password: "s3cret-pw"},
				append(common, redisrules.WithDocument("d"))...)
		}, "redis document d @ 127.0.0.1:1"},
		{"options: Sentinel", func() (*redisrules.RuleSource, error) {
			return redisrules.NewFromOptions(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:1", "127.0.0.2:1"}, MasterName: "mymaster", Password: "s3cret-pw"},
				append(common, redisrules.WithDocument("d"))...)
		}, "redis document d @ Sentinel master mymaster via 127.0.0.1:1,127.0.0.2:1"},
		{"options: a cluster", func() (*redisrules.RuleSource, error) {
			return redisrules.NewFromOptions(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:1", "127.0.0.2:1"}, Password: "s3cret-pw"},
				append(common, redisrules.WithDocument("d"))...)
		}, "redis document d @ cluster 127.0.0.1:1,127.0.0.2:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := tc.new()
			require.NoError(t, err)
			defer src.Close()
			lb, err := graylb.New(graylb.NewRegistry(), graylb.WithRuleSource(src), graylb.WithRuleLoadTimeout(100*time.Millisecond),
				graylb.WithLogger(quiet))
			require.NoError(t, err)
			defer lb.Close()
			got := lb.RulesState().Source
			require.Equal(t, tc.want, got)
			require.False(t, strings.Contains(got, "s3cret") || strings.Contains(got, "app@") || strings.Contains(got, "user:"), got)
		})
	}
}
