package graylbkratos_test

import (
	"context"
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/go-kratos/kratos/v2/registry"
	"github.com/graylb/graylb"
	graylbkratos "github.com/graylb/graylb/kratos"
)

// next runs w.Next with a deadline.
func next(t *testing.T, w registry.Watcher) ([]*registry.ServiceInstance, error) {
	t.Helper()
	type res struct {
		list []*registry.ServiceInstance
		err  error
	}
	ch := make(chan res, 1)
	go func() {
		l, err := w.Next()
		ch <- res{l, err}
	}()
	select {
	case r := <-ch:
		return r.list, r.err
	case <-time.After(10 * time.Second):
		t.Fatal("Next did not return within 10s")
		return nil, nil
	}
}

// blocked reports whether w.Next stays blocked for a while; it stops w
// to end the Next it started.
func blocked(t *testing.T, w registry.Watcher) bool {
	t.Helper()
	ch := make(chan error, 1)
	go func() {
		_, err := w.Next()
		ch <- err
	}()
	select {
	case <-ch:
		return false
	case <-time.After(100 * time.Millisecond):
	}
	w.Stop()
	select {
	case err := <-ch:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Next after Stop: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not unblock Next within 10s")
	}
	return true
}

func endpoints(list []*registry.ServiceInstance) []string {
	var out []string
	for _, si := range list {
		out = append(out, si.Endpoints...)
	}
	sort.Strings(out)
	return out
}

func TestDiscoveryWatch(t *testing.T) {
	reg := graylb.NewRegistry()
	d := graylbkratos.NewDiscovery(reg)
	if err := reg.Register(graylb.NewInstance("user.grpc", "127.0.0.1", 9000, map[string]string{"kind": "grpc", "gray": "true", "version": "v2"})); err != nil {
		t.Fatal(err)
	}
	w, err := d.Watch(context.Background(), "user.grpc")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// The first Next returns the current list.
	list, err := next(t, w)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Name != "user.grpc" || list[0].Version != "v2" || list[0].Metadata["gray"] != "true" ||
		list[0].Metadata["weight"] != "1" || list[0].Endpoints[0] != "grpc://127.0.0.1:9000" || list[0].ID != "127.0.0.1:9000" {
		t.Fatalf("first Next: %+v", list[0])
	}
	// A change: the next Next returns the new list.
	if err := reg.Register(graylb.NewInstance("user.grpc", "127.0.0.1", 9001, map[string]string{"kind": "grpc"})); err != nil {
		t.Fatal(err)
	}
	list, err = next(t, w)
	if err != nil {
		t.Fatal(err)
	}
	if got := endpoints(list); len(got) != 2 || got[1] != "grpc://127.0.0.1:9001" {
		t.Fatalf("after a change: %v", got)
	}
	// No change: Next blocks until Stop, then returns context.Canceled.
	if !blocked(t, w) {
		t.Fatal("Next returned without a change")
	}
	if _, err := next(t, w); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next after Stop: %v", err)
	}
	if err := w.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

// TestDiscoveryWatchEmptyStart: a service with no instance yet: the first
// Next waits for one.
func TestDiscoveryWatchEmptyStart(t *testing.T) {
	reg := graylb.NewRegistry()
	d := graylbkratos.NewDiscovery(reg)
	w, err := d.Watch(context.Background(), "later")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	type res struct {
		list []*registry.ServiceInstance
		err  error
	}
	first := make(chan res, 1)
	go func() {
		l, err := w.Next()
		first <- res{l, err}
	}()
	select {
	case r := <-first:
		t.Fatalf("Next returned %v, %v before any instance", endpoints(r.list), r.err)
	case <-time.After(50 * time.Millisecond): // must wait: that Next waits shows only in time passing without an answer
	}
	reg.Register(graylb.NewInstance("later", "127.0.0.1", 9000, nil))
	var list []*registry.ServiceInstance
	select {
	case r := <-first:
		if r.err != nil {
			t.Fatal(r.err)
		}
		list = r.list
	case <-time.After(10 * time.Second):
		t.Fatal("Next did not return within 10s of the first instance")
	}
	// No kind: both schemes, so Kratos' HTTP and gRPC clients each find it.
	if got := endpoints(list); len(got) != 2 || got[0] != "grpc://127.0.0.1:9000" || got[1] != "http://127.0.0.1:9000" {
		t.Fatalf("endpoints %v", got)
	}
	// Emptied after the first list: Next reports the empty list.
	if err := reg.Deregister("later", "127.0.0.1:9000"); err != nil {
		t.Fatal(err)
	}
	list, err = next(t, w)
	if err != nil || len(list) != 0 {
		t.Fatalf("after the last instance left: %v, %v", list, err)
	}
}

// TestDiscoveryWatchContext: Next returns ctx's error once ctx ends.
func TestDiscoveryWatchContext(t *testing.T) {
	reg := graylb.NewRegistry()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := graylbkratos.NewDiscovery(reg).Watch(ctx, "svc")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	cancel()
	if _, err := next(t, w); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next after ctx ended: %v", err)
	}
}

func TestDiscoveryGetService(t *testing.T) {
	reg := graylb.NewRegistry()
	d := graylbkratos.NewDiscovery(reg)
	if list, err := d.GetService(context.Background(), "unknown"); err != nil || len(list) != 0 {
		t.Fatalf("unknown service: %v, %v", list, err)
	}
	up := graylb.NewInstance("svc", "127.0.0.1", 9000, map[string]string{"kind": "http"})
	down := graylb.NewInstance("svc", "127.0.0.1", 9001, nil)
	down.Healthy = false
	zero := graylb.NewInstance("svc", "127.0.0.1", 9002, nil)
	zero.Weight = 0
	for _, in := range []graylb.Instance{up, down, zero} {
		if err := reg.Register(in); err != nil {
			t.Fatal(err)
		}
	}
	list, err := d.GetService(context.Background(), "svc")
	if err != nil {
		t.Fatal(err)
	}
	if got := endpoints(list); len(got) != 1 || got[0] != "http://127.0.0.1:9000" {
		t.Fatalf("usable endpoints %v", got)
	}
	// Bad names are the Supplier's to refuse.
	if _, err := d.Watch(context.Background(), "a/b"); !errors.Is(err, graylb.ErrInvalidService) {
		t.Fatalf("Watch of a bad name: %v", err)
	}
}

func TestInstances(t *testing.T) {
	si := &registry.ServiceInstance{ID: "1", Name: "user", Version: "v3", Metadata: map[string]string{"gray": "true"},
		Endpoints: []string{"http://127.0.0.1:8000?isSecure=false", "grpc://[::1]:9000"}}
	list, err := graylbkratos.Instances(si)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Service != "user.http" || list[0].Port != 8000 || list[0].Metadata["kind"] != "http" ||
		list[0].Metadata["version"] != "v3" || list[0].Metadata["gray"] != "true" ||
		list[1].Service != "user.grpc" || list[1].Host != "::1" || list[1].Metadata["kind"] != "grpc" {
		t.Fatalf("instances %+v", list)
	}
	if si.Metadata["kind"] != "" {
		t.Fatal("Instances changed the ServiceInstance's metadata")
	}
	for name, bad := range map[string]*registry.ServiceInstance{
		"nil":          nil,
		"no name":      {Endpoints: []string{"http://127.0.0.1:1"}},
		"no endpoint":  {Name: "x"},
		"no scheme":    {Name: "x", Endpoints: []string{"127.0.0.1:80"}},
		"no port":      {Name: "x", Endpoints: []string{"http://127.0.0.1"}},
		"port 0":       {Name: "x", Endpoints: []string{"http://127.0.0.1:0"}},
		"port too big": {Name: "x", Endpoints: []string{"http://127.0.0.1:70000"}},
		"bad host":     {Name: "x", Endpoints: []string{"http://a%20b:80"}},
		"bad name":     {Name: "x/y", Endpoints: []string{"http://127.0.0.1:80"}},
		"not a url":    {Name: "x", Endpoints: []string{"http://[::1"}},
	} {
		if _, err := graylbkratos.Instances(bad); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestRegistrar(t *testing.T) {
	reg := graylb.NewRegistry()
	r := graylbkratos.NewRegistrar(reg)
	si := &registry.ServiceInstance{Name: "user", Endpoints: []string{"http://127.0.0.1:8000", "grpc://127.0.0.1:9000"}}
	if err := r.Register(context.Background(), si); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"user.http", "user.grpc"} {
		if list, err := reg.Instances(context.Background(), s); err != nil || len(list) != 1 {
			t.Fatalf("%s: %v, %v", s, list, err)
		}
	}
	if err := r.Deregister(context.Background(), si); err != nil {
		t.Fatal(err)
	}
	if list, _ := reg.Instances(context.Background(), "user.http"); len(list) != 0 {
		t.Fatalf("after Deregister: %v", list)
	}
	if err := r.Register(context.Background(), &registry.ServiceInstance{Name: "user"}); err == nil {
		t.Fatal("an instance without endpoints registered")
	}
}

// TestDiscoveryWatchEmptiedBeforeFirstNext: the service's last instance
// leaves after Watch found it but before the first Next: that Next does
// not return the instance that left; it waits for one.
func TestDiscoveryWatchEmptiedBeforeFirstNext(t *testing.T) {
	reg := graylb.NewRegistry()
	if err := reg.Register(graylb.NewInstance("svc", "127.0.0.1", 9000, nil)); err != nil {
		t.Fatal(err)
	}
	w, err := graylbkratos.NewDiscovery(reg).Watch(context.Background(), "svc")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := reg.Deregister("svc", "127.0.0.1:9000"); err != nil {
		t.Fatal(err)
	}
	ch := make(chan []*registry.ServiceInstance, 1)
	go func() {
		list, _ := w.Next()
		ch <- list
	}()
	select {
	case list := <-ch:
		t.Fatalf("the first Next returned %v, an instance that left", endpoints(list))
	case <-time.After(100 * time.Millisecond):
	}
	// The next instance is what the first Next returns.
	if err := reg.Register(graylb.NewInstance("svc", "127.0.0.1", 9001, nil)); err != nil {
		t.Fatal(err)
	}
	select {
	case list := <-ch:
		if got := endpoints(list); len(got) != 2 || got[0] != "grpc://127.0.0.1:9001" {
			t.Fatalf("the first Next returned %v, want the instance at 9001", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Next did not return within 10s of a new instance")
	}
}
