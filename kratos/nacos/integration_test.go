package kratosnacos_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	klog "github.com/go-kratos/kratos/v2/log"
	"github.com/go-kratos/kratos/v2/registry"
	"github.com/go-kratos/kratos/v2/selector"
	khttp "github.com/go-kratos/kratos/v2/transport/http"
	"github.com/graylb/graylb"
	graylbkratos "github.com/graylb/graylb/kratos"
	kratosnacos "github.com/graylb/graylb/kratos/nacos"
	"github.com/graylb/graylb/nacos"
)

// The integration test needs a real Nacos server: GRAYLB_NACOS_ADDR
// (host:port, HTTP), as the nacos package's integration tests. It does not
// run under -race: nacos-sdk-go races inside its RPC client (see the nacos
// package's integration tests); make test runs it without -race.
func nacosAddr(t *testing.T) string {
	t.Helper()
	if raceEnabled {
		t.Skip("integration test skipped under -race: nacos-sdk-go races inside its RPC client; make test runs it without -race")
	}
	addr := os.Getenv("GRAYLB_NACOS_ADDR")
	if addr == "" {
		t.Skip("no Nacos server: set GRAYLB_NACOS_ADDR=127.0.0.1:8848 (make test starts one with scripts/nacos.sh)")
	}
	return addr
}

// sdkDir is a temporary folder for the SDK's cache and log files, removed
// with retries: nacos-sdk-go writes its disk cache from goroutines that can
// outlive a client's Close by a moment (see the nacos package's tests).
func sdkDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "graylb-kratos-nacos-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !poll(time.Second, 20*time.Millisecond, func() bool { err = os.RemoveAll(dir); return err == nil }) {
			t.Logf("left %s behind: %v", dir, err)
		}
	})
	return dir
}

// eventually polls cond every 20 ms until it holds or 15 s pass.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	if !poll(15*time.Second, 20*time.Millisecond, func() (ok bool) { ok, last = cond(); return ok }) {
		t.Fatalf("%s: not within 15s (last: %s)", what, last)
	}
}

// poll calls cond every tick until it holds or within passes, and reports
// whether it held.
func poll(within, tick time.Duration, cond func() bool) bool {
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for deadline := time.After(within); !cond(); {
		select {
		case <-ticker.C:
		case <-deadline:
			return cond()
		}
	}
	return true
}

// TestIntegrationNacos: Kratos HTTP servers registered in Nacos with the
// Registrar, found through the Discovery over the nacos Supplier, picked
// by graylb's Selector by kind; a deregistered gray instance leaves the
// gray calls on prod (the fall-back), never failing them.
func TestIntegrationNacos(t *testing.T) {
	addr := nacosAddr(t)
	klog.SetLogger(klog.NewStdLogger(io.Discard))
	dir := sdkDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client, err := nacos.NewClient(ctx, nacos.WithServers(addr), nacos.WithCacheDir(filepath.Join(dir, "cache")),
		nacos.WithLogDir(filepath.Join(dir, "log")), nacos.WithLogLevel("error"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	sup, err := nacos.NewSupplier(nacos.WithClient(client))
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Close()
	lb, err := graylb.New(sup)
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	b := graylbkratos.NewBuilder(lb)
	defer b.Close()
	selector.SetGlobalSelector(b)
	// Each registration with a Client of its own: a nacos Client holds one
	// instance per service (one process, one instance), and this test runs
	// two instances of one service in one process.
	reg := kratosnacos.NewRegistrar(kratosnacos.WithNacosOptions(nacos.WithServers(addr), nacos.WithCacheDir(filepath.Join(dir, "rcache")),
		nacos.WithLogDir(filepath.Join(dir, "rlog")), nacos.WithLogLevel("error"), nacos.WithDrainWait(100*time.Millisecond)))

	name := fmt.Sprintf("kratos-it-%d", time.Now().UnixNano()%1e9)
	instances := map[bool]*registry.ServiceInstance{}
	for _, gray := range []bool{false, true} {
		kind := map[bool]string{false: "prod", true: "gray"}[gray]
		srv := khttp.NewServer(khttp.Address("127.0.0.1:0"), khttp.Middleware(graylbkratos.Server(lb)))
		srv.Route("/").GET("/who", func(c khttp.Context) error { return c.Result(200, map[string]string{"kind": kind}) })
		u, err := srv.Endpoint()
		if err != nil {
			t.Fatal(err)
		}
		go srv.Start(context.Background())
		defer srv.Stop(context.Background())
		si := &registry.ServiceInstance{ID: kind, Name: name, Version: "v1",
			Metadata: map[string]string{"gray": fmt.Sprint(gray)}, Endpoints: []string{u.String()}}
		if err := reg.Register(ctx, si); err != nil {
			t.Fatal(err)
		}
		defer reg.Deregister(context.Background(), si)
		instances[gray] = si
	}

	// The Discovery sees both, as Kratos' registries report them.
	d := graylbkratos.NewDiscovery(sup)
	w, err := d.Watch(ctx, name+".http")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	eventually(t, "the watcher lists both instances", func() (bool, string) {
		list, err := d.GetService(ctx, name+".http")
		return err == nil && len(list) == 2, fmt.Sprint(len(list), err)
	})

	c, err := khttp.NewClient(ctx, khttp.WithEndpoint("discovery:///"+name+".http"), khttp.WithDiscovery(d),
		khttp.WithMiddleware(graylbkratos.Client(lb)), khttp.WithBlock())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	who := func(gray string) (string, error) {
		var out struct{ Kind string }
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		err := c.Invoke(graylb.WithValue(cctx, "gray", gray), "GET", "/who", nil, &out)
		return out.Kind, err
	}
	eventually(t, "gray and prod calls reach their kind", func() (bool, string) {
		g, err1 := who("true")
		p, err2 := who("false")
		return g == "gray" && p == "prod", fmt.Sprint(g, p, err1, err2)
	})
	for i := 0; i < 50; i++ {
		if k, err := who("false"); err != nil || k != "prod" {
			t.Fatalf("prod call: %q, %v", k, err)
		}
		if k, err := who("true"); err != nil || k != "gray" {
			t.Fatalf("gray call: %q, %v", k, err)
		}
	}
	// The gray instance leaves: gray calls fall back to prod.
	if err := reg.Deregister(ctx, instances[true]); err != nil {
		t.Fatal(err)
	}
	eventually(t, "gray calls fall back to prod after the gray instance left", func() (bool, string) {
		k, err := who("true")
		return k == "prod" && err == nil, fmt.Sprint(k, err)
	})
}
