package nacos

import (
	"context"
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
}

func newSDKNaming(nc naming_client.INamingClient, window time.Duration) *sdkNaming {
	n := &sdkNaming{nc: nc, window: window, stop: make(chan struct{})}
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
func (n *sdkNaming) subscribe(p *vo.SubscribeParam) error                     { return n.nc.Subscribe(p) }
func (n *sdkNaming) unsubscribe(p *vo.SubscribeParam) error                   { return n.nc.Unsubscribe(p) }
func (n *sdkNaming) healthy() bool                                            { return n.nc.ServerHealthy() }

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
