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

// A query answering the list repair gave the SDK, while the SDK still
// holds it, repairs nothing (no store, no disk write): each reconciliation
// reads every subscribed service, and writing each to the disk cache made
// a round of thousands of services run into the next. A list that changed,
// or a push the SDK took meanwhile, is repaired again; a service no longer
// subscribed is forgotten.
func TestRepair_SkipsTheListTheSDKHolds(t *testing.T) {
	holder := naming_cache.NewServiceInfoHolder("", t.TempDir(), true, true)
	cb := func([]model.Instance, error) {}
	holder.RegisterCallback("DEFAULT_GROUP@@svc", "", &cb)
	c := &Client{holder: holder, diskDir: t.TempDir(), cfg: &config{logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}
	file := func() string {
		files, err := os.ReadDir(c.diskDir)
		require.NoError(t, err)
		require.Len(t, files, 1)
		return filepath.Join(c.diskDir, files[0].Name())
	}
	refTime := func() uint64 {
		svc, ok := holder.GetServiceInfo("svc", "DEFAULT_GROUP", "")
		require.True(t, ok)
		return svc.LastRefTime
	}
	c.repair("svc", "DEFAULT_GROUP", "", &model.Service{Hosts: hostsOf(3, 7000), LastRefTime: 10})
	require.Equal(t, uint64(10), refTime())
	require.NoError(t, os.Remove(file()))

	// The same hosts in another order: nothing stored, nothing written.
	same := hostsOf(3, 7000)
	same[0], same[2] = same[2], same[0]
	c.repair("svc", "DEFAULT_GROUP", "", &model.Service{Hosts: same, LastRefTime: 20})
	require.Equal(t, uint64(10), refTime())
	files, err := os.ReadDir(c.diskDir)
	require.NoError(t, err)
	require.Empty(t, files, "an unchanged list written again")

	// A list that changed is repaired.
	c.repair("svc", "DEFAULT_GROUP", "", &model.Service{Hosts: hostsOf(4, 7000), LastRefTime: 30})
	require.Equal(t, uint64(30), refTime())
	require.NoError(t, os.Remove(file()))

	// A push the SDK took meanwhile: the same answer is repaired again.
	holder.ProcessService(&model.Service{Name: "svc", GroupName: "DEFAULT_GROUP", Hosts: hostsOf(1, 9000), LastRefTime: 40})
	c.repair("svc", "DEFAULT_GROUP", "", &model.Service{Hosts: hostsOf(4, 7000), LastRefTime: 35})
	require.Equal(t, uint64(41), refTime())
	var onDisk model.Service
	b, err := os.ReadFile(file())
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &onDisk))
	require.Len(t, onDisk.Hosts, 4)

	c.forgetRepair("DEFAULT_GROUP@@svc", "")
	require.Empty(t, c.repaired)
}
