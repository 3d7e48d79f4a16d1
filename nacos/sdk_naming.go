package nacos

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
)

// sdkNaming adapts an SDK naming client given by WithNamingClient. Its
// lists come from the SDK's own cache (see WithNamingClient); it watches
// the client's connection to report refills as a Client does.
type sdkNaming struct {
	nc      naming_client.INamingClient
	window  time.Duration
	trouble atomic.Int64
	stop    chan struct{}
	done    sync.WaitGroup
	once    sync.Once
	logger  *slog.Logger

	// Subscribe and Unsubscribe wait on the server: each service's run in
	// order on a goroutine of the service's own, never on the caller's.
	qmu    sync.Mutex
	queues map[string][]func() // by service; present while its goroutine runs
}

func newSDKNaming(nc naming_client.INamingClient, window time.Duration, logger *slog.Logger) *sdkNaming {
	n := &sdkNaming{nc: nc, window: window, stop: make(chan struct{}), logger: logger, queues: map[string][]func(){}}
	n.done.Add(1)
	go func() {
		defer n.done.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		ever := false
		for {
			select {
			case <-n.stop:
				return
			case <-tick.C:
			}
			if nc.ServerHealthy() {
				ever = true
			} else if ever {
				n.trouble.Store(time.Now().UnixNano())
			}
		}
	}()
	return n
}

func (n *sdkNaming) query(ctx context.Context, service, group string, clusters []string) ([]model.Instance, error) {
	type result struct {
		hosts []model.Instance
		err   error
	}
	done := make(chan result, 1)
	go func() {
		h, err := n.nc.SelectAllInstances(vo.SelectAllInstancesParam{ServiceName: service, GroupName: group, Clusters: clusters})
		done <- result{h, err}
	}()
	select {
	case r := <-done:
		return r.hosts, r.err
	case <-ctx.Done():
		select {
		case r := <-done: // finished as ctx ended: the answer stands
			return r.hosts, r.err
		default:
			return nil, ctx.Err()
		}
	}
}

func (n *sdkNaming) cached(string, string, []string) ([]model.Instance, bool) { return nil, false }

// subscribe and unsubscribe queue the SDK's call for p's service and
// return: the SDK's calls wait on the server (see later).
func (n *sdkNaming) subscribe(p *vo.SubscribeParam) error {
	n.later(p, "subscribe", func() error { return n.nc.Subscribe(p) })
	return nil
}

func (n *sdkNaming) unsubscribe(p *vo.SubscribeParam) error {
	n.later(p, "unsubscribe", func() error { return n.nc.Unsubscribe(p) })
	return nil
}

// later runs call after the calls queued before it for p's service, on
// the service's goroutine (started unless it runs). A call the server
// never answers ends at the SDK's timeout; the goroutine may outlive the
// Supplier's Close by that much (the SDK client is the caller's).
func (n *sdkNaming) later(p *vo.SubscribeParam, what string, call func() error) {
	key := p.GroupName + "@@" + p.ServiceName + "@@" + strings.Join(p.Clusters, ",")
	n.qmu.Lock()
	q, running := n.queues[key]
	n.queues[key] = append(q, func() {
		if err := call(); err != nil {
			n.logger.Warn("nacos: "+what+" failed", "service", p.ServiceName, "err", firstLine(err))
		}
	})
	n.qmu.Unlock()
	if running {
		return
	}
	go func() {
		for {
			n.qmu.Lock()
			q := n.queues[key]
			if len(q) == 0 {
				delete(n.queues, key)
				n.qmu.Unlock()
				return
			}
			next := q[0]
			n.queues[key] = q[1:]
			n.qmu.Unlock()
			next()
		}
	}()
}

func (n *sdkNaming) healthy() bool { return n.nc.ServerHealthy() }

func (n *sdkNaming) RefillUntil() time.Time {
	t := n.trouble.Load()
	if t == 0 {
		return time.Time{}
	}
	return time.Unix(0, t).Add(n.window)
}

func (n *sdkNaming) close() {
	n.once.Do(func() { close(n.stop); n.done.Wait() })
}
