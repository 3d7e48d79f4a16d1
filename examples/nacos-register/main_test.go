package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/graylb/graylb/nacos"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
)

// registry is an SDK naming client standing in for Nacos: it records the
// registered address and, when the instance deregisters, whether the
// instance still answered then (clients keep sending to it until they see
// the deregistration).
type registry struct {
	naming_client.INamingClient // the methods Register does not use; nil

	mu               sync.Mutex
	addr             string
	registered       chan struct{}
	deregistered     bool
	answeredAtDereg  bool
	answerAtDeregErr error
}

func (r *registry) RegisterInstance(p vo.RegisterInstanceParam) (bool, error) {
	r.mu.Lock()
	r.addr = fmt.Sprintf("%s:%d", p.Ip, p.Port)
	r.mu.Unlock()
	close(r.registered)
	return true, nil
}

func (r *registry) DeregisterInstance(vo.DeregisterInstanceParam) (bool, error) {
	r.mu.Lock()
	addr := r.addr
	r.mu.Unlock()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/")
	if err == nil {
		resp.Body.Close()
	}
	r.mu.Lock()
	r.deregistered = true
	r.answeredAtDereg, r.answerAtDeregErr = err == nil, err
	r.mu.Unlock()
	return true, nil
}

// SIGTERM deregisters the instance while it still serves, and only then
// stops it: the order a graceful stop needs.
func TestRun_DeregistersBeforeItStopsServing(t *testing.T) {
	reg := &registry{registered: make(chan struct{})}
	stop := make(chan os.Signal, 1)
	var out strings.Builder
	done := make(chan error, 1)
	go func() { done <- run("user-service", "127.0.0.1", 0, stop, &out, nacos.WithNamingClient(reg)) }()
	select {
	case <-reg.registered:
	case <-time.After(10 * time.Second):
		t.Fatal("not registered within 10s")
	}
	reg.mu.Lock()
	addr := reg.addr
	reg.mu.Unlock()
	serving := func() bool {
		resp, err := http.Get("http://" + addr + "/")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return strings.HasPrefix(string(b), "user-service "+addr)
	}
	tick := time.NewTicker(10 * time.Millisecond) // polled: the server says nothing when it listens
	defer tick.Stop()
	for deadline := time.After(10 * time.Second); !serving(); {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatal("not serving within 10s")
		}
	}

	stop <- syscall.SIGTERM
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return within 30s of SIGTERM")
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if !reg.deregistered {
		t.Fatal("not deregistered on SIGTERM")
	}
	if !reg.answeredAtDereg {
		t.Errorf("the instance no longer answered when it deregistered (it must stop serving only after): %v", reg.answerAtDeregErr)
	}
	if _, err := http.Get("http://" + addr + "/"); err == nil {
		t.Error("still serving after run returned")
	}
}
