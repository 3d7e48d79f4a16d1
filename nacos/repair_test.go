package nacos

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client/naming_cache"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/stretchr/testify/require"
)

// hostsOf is a list of n hosts, each with metadata of its own.
func hostsOf(n, port int) []model.Instance {
	out := make([]model.Instance, n)
	for i := range out {
		out[i] = model.Instance{Ip: "127.0.0.1", Port: uint64(port + n - i), // in the reverse of the SDK's order Weight: 1, Healthy: true, Enable: true,
			Metadata: map[string]string{"gray": fmt.Sprint(i%2 == 0), "k": fmt.Sprint(i)}}
	}
	return out
}

// A list repair hands the SDK and the list the caller reads share nothing,
// and the repair runs none of the SDK's own processing: the SDK sorts its
// cached list in place when the next push comes (as the old list it
// compares with) and writes it to its disk cache, and a repair that stored
// the very list the Supplier then read raced with both (a crash in
// encoding/json, "index out of range", in the SDK's disk cache writer, and
// a data race under the race detector). Run with -race.
func TestRepair_SharesNothingWithTheSDK(t *testing.T) {
	holder := naming_cache.NewServiceInfoHolder("", t.TempDir(), true, true)
	cb := func([]model.Instance, error) {}
	holder.RegisterCallback("DEFAULT_GROUP@@svc", "", &cb)
	c := &Client{holder: holder, diskDir: t.TempDir(), cfg: &config{logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}
	var wg sync.WaitGroup
	const rounds = 200
	wg.Add(2)
	go func() { // pushes
		defer wg.Done()
		for i := range rounds {
			holder.ProcessService(&model.Service{Name: "svc", GroupName: "DEFAULT_GROUP", Hosts: hostsOf(20, 9000+i), LastRefTime: uint64(1e6 + 10*i)})
		}
	}()
	go func() { // reconciliations: repair, then read what the query returned
		defer wg.Done()
		for i := range rounds {
			svc := &model.Service{Hosts: hostsOf(20, 7000+i), LastRefTime: 1}
			c.repair("svc", "DEFAULT_GROUP", "", svc)
			n := 0
			for _, h := range svc.Hosts {
				n += len(h.Metadata) + int(h.Port)
			}
			require.Positive(t, n)
		}
	}()
	wg.Wait()
	_, ok := holder.GetServiceInfo("svc", "DEFAULT_GROUP", "")
	require.True(t, ok)
	// The repairs' disk cache file holds a whole list, and nothing else is left.
	files, err := os.ReadDir(c.diskDir)
	require.NoError(t, err)
	require.Len(t, files, 1)
	b, err := os.ReadFile(filepath.Join(c.diskDir, files[0].Name()))
	require.NoError(t, err)
	var onDisk model.Service
	require.NoError(t, json.Unmarshal(b, &onDisk))
	require.Len(t, onDisk.Hosts, 20)
}
