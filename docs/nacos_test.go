package docs

import (
	"context"
	"log"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/httpctx"
	"github.com/graylb/graylb/nacos"
)

// nacosTour is docs/nacos.md's snippet; use runs with its LoadBalancer
// while the registration holds.
func nacosTour(ctx context.Context, servers []string, user, pass, ip string, port int, srv *http.Server, sigterm <-chan os.Signal, use func(*graylb.LoadBalancer) error) error {
	// snippet: nacos-tour
	// one connection per server configuration, shared by everything below
	client, err := nacos.NewClient(ctx,
		nacos.WithServers(servers...), // "10.0.0.1:8848", "10.0.0.2:8848": a cluster
		nacos.WithNamespace("dev"), nacos.WithGroup("DEFAULT_GROUP"),
		nacos.WithCredentials(user, pass)) // never logged
	if err != nil {
		return err
	}
	defer client.Close()

	sup, err := nacos.NewSupplier(nacos.WithClient(client))
	if err != nil {
		return err
	}
	defer sup.Close()
	rules, err := nacos.NewRuleSource("graylb-rules.json", nacos.WithClient(client))
	if err != nil {
		return err
	}
	// the process's kind, said once: GRAYLB_GRAY=true on gray builds
	lb, err := graylb.New(sup, graylb.WithRuleSource(rules), graylb.WithSelfGray(nacos.GrayFromEnv()))
	if err != nil {
		return err
	}
	defer lb.Close()

	// register this process under lb's metadata keys and kind (version: GRAYLB_VERSION)
	reg, err := nacos.Register(ctx, nacos.Service{Name: "user-service", Host: ip, Port: port},
		nacos.WithClient(client), nacos.WithLoadBalancer(lb))
	if err != nil {
		return err
	}
	defer reg.Close() // deregisters at once (idempotent, within nacos.DefaultCloseTimeout)
	// end snippet
	if err := use(lb); err != nil {
		return err
	}
	return gracefulStop(ctx, reg, srv, sigterm)
}

// gracefulStop is docs/nacos.md's graceful-stop snippet.
func gracefulStop(ctx context.Context, reg *nacos.Registration, srv *http.Server, sigterm <-chan os.Signal) error {
	// snippet: nacos-graceful-stop
	// on SIGTERM (ctx: 60 s): off the registry, keep serving until lb's
	// callers stop (Java callers cache lists 35 s), then finish what is in flight
	<-sigterm
	if err := reg.Deregister(ctx); err != nil {
		log.Printf("deregister: %v", err) // stop all the same
	}
	return srv.Shutdown(ctx) // or grpcServer.GracefulStop()
	// end snippet
}

// The snippet against a real Nacos server (GRAYLB_NACOS_ADDR; make test
// starts one). It registers a gray instance (GRAYLB_GRAY=true) that a
// gray request reaches through the HTTP Transport.
func TestNacosTour(t *testing.T) {
	if raceEnabled {
		t.Skip("skipped under -race: nacos-sdk-go races inside its RPC client; make test runs it without -race")
	}
	addr := os.Getenv("GRAYLB_NACOS_ADDR")
	if addr == "" {
		t.Skip("no Nacos server: set GRAYLB_NACOS_ADDR=127.0.0.1:8848 (make test starts one with scripts/nacos.sh)")
	}
	// The SDK's cache and log folders default to os.UserCacheDir(): a
	// folder of the test's. The SDK's writers can outlive Close by a
	// moment, so it is removed with retries.
	dir, err := os.MkdirTemp("", "graylb-docs-nacos-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The SDK's writer goroutines finish on their own.
		poll(time.Second, 20*time.Millisecond, func() bool { return os.RemoveAll(dir) == nil })
	})
	t.Setenv("XDG_CACHE_HOME", dir)
	t.Setenv("GRAYLB_GRAY", "true")
	t.Setenv("GRAYLB_VERSION", "")
	instance := echo(t, "user-service-gray")
	host, port := hostPort(t, instance.Listener.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sigterm := make(chan os.Signal, 1)
	sigterm <- os.Interrupt // the snippet stops once the LoadBalancer was used
	served := time.Now()
	err = nacosTour(ctx, []string{addr}, "", "", host, port, instance.Config, sigterm, func(lb *graylb.LoadBalancer) error {
		served = time.Now()
		client := &http.Client{Transport: httpctx.NewTransport(lb), Timeout: 5 * time.Second}
		// Nacos pushes a new registration within about a second.
		var got string
		var err error
		if !poll(15*time.Second, 100*time.Millisecond, func() bool {
			got, err = tryGet(client, "http://user-service/", "gray", "true")
			return err == nil && got == "user-service-gray gray=true"
		}) {
			t.Errorf("a gray request through the snippet's LoadBalancer: %q, %v", got, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Deregister waited the drain wait (default 2 s) before Shutdown.
	if took := time.Since(served); took < 2*time.Second {
		t.Errorf("the graceful stop returned %v after the last use: no drain wait", took)
	}
	if _, err := http.Get(instance.URL); err == nil {
		t.Error("the instance still serves after the graceful stop")
	}
}
