package gozero_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/nacos"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nacosOpts returns the options of a Nacos client of the server at
// GRAYLB_NACOS_ADDR, with its cache and log files in a folder of the test,
// and skips the test without a server or under -race: nacos-sdk-go races
// inside its RPC client whatever the caller does (see
// nacos/integration_test.go); `make test` runs the integration tests in a
// second pass without -race.
func nacosOpts(t *testing.T) []nacos.Option {
	t.Helper()
	if raceEnabled {
		t.Skip("integration test skipped under -race: nacos-sdk-go races inside its RPC client; make test runs it without -race")
	}
	addr := os.Getenv("GRAYLB_NACOS_ADDR")
	if addr == "" {
		t.Skip("no Nacos server: set GRAYLB_NACOS_ADDR=127.0.0.1:8848 (make test starts one with scripts/nacos.sh)")
	}
	dir, err := os.MkdirTemp("", "graylb-gozero-test-")
	require.NoError(t, err)
	t.Cleanup(func() {
		// The SDK's writer goroutines can outlive Close by a moment.
		assert.Eventually(t, func() bool { return os.RemoveAll(dir) == nil }, time.Second, 20*time.Millisecond, "removing %s", dir)
	})
	return []nacos.Option{nacos.WithServers(addr), nacos.WithCacheDir(filepath.Join(dir, "cache")),
		nacos.WithLogDir(filepath.Join(dir, "log")), nacos.WithLogLevel("error")}
}

// The rest → zrpc → zrpc chain over graylb's Nacos supplier: each instance
// registers itself in Nacos (nacos.Register), every process routes through
// the supplier; under a 50 % canary no chain mixes kinds, a gray header
// goes gray on every hop and prod never reaches gray.
func TestIntegration_NacosChain(t *testing.T) {
	opts := nacosOpts(t)
	sup, err := nacos.NewSupplier(opts...)
	require.NoError(t, err)
	t.Cleanup(func() { sup.Close() })
	suffix := fmt.Sprint(time.Now().UnixNano() % 1e9)
	svcA, svcB := "gozero-it-a-"+suffix, "gozero-it-b-"+suffix
	register := func(service string, gray bool, host string, port int) {
		reg, err := nacos.Register(context.Background(), nacos.Service{Name: service, Host: host, Port: port, Gray: &gray}, opts...)
		require.NoError(t, err)
		t.Cleanup(func() { reg.Close() })
		// The next instance's clients dial at once: wait until the
		// supplier lists this one.
		addr := fmt.Sprintf("%s:%d", host, port)
		require.Eventually(t, func() bool {
			list, err := sup.Instances(context.Background(), service)
			for _, in := range list {
				if err == nil && in.Addr() == addr && graylb.IsGray(in.Metadata["gray"]) == gray {
					return true
				}
			}
			return false
		}, 15*time.Second, 20*time.Millisecond, "Nacos lists %s %s", service, addr)
	}
	url := chainOver(t, sup, svcA, svcB, register, graylb.Rules{CanaryPercent: 50})

	counts := send(t, url, 200)
	assert.Zero(t, mixed(counts), "every hop of a request lands on the same kind: %v", counts)
	assert.Positive(t, counts[grayChain], "%v", counts)
	assert.Positive(t, counts[prodChain], "%v", counts)
	assert.Equal(t, map[string]int{grayChain: 50}, send(t, url, 50, "gray", "true"))
	assert.Equal(t, map[string]int{prodChain: 50}, send(t, url, 50, "gray", "false"))
}
