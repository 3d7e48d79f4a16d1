package nacos

import (
	"strings"

	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client/naming_grpc"
	"github.com/nacos-group/nacos-sdk-go/v2/util"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
)

// The server side of subscriptions. subscribe and unsubscribe change what
// the Client's callbacks want at once, under no lock held across I/O, and
// leave telling the server to one goroutine per service (syncSubscription):
// a caller never waits on the server (a stalled server answers a request
// only at the SDK's timeout), and the requests of one service reach the
// server in order, the last one saying what the callbacks want when it
// was sent. Close ends them: closing the connection fails a request in
// flight.

// subscriptionSync is the goroutine telling the server about one service;
// dirty says that what the callbacks want changed since it last looked.
type subscriptionSync struct {
	dirty bool
}

// subscribe registers p's callback and has the server subscribed to the
// service; the SDK subscribes again after every reconnection. It does not
// wait for the server.
func (c *Client) subscribe(p *vo.SubscribeParam) error {
	cl := strings.Join(p.Clusters, ",")
	c.holder.RegisterCallback(util.GetGroupName(p.ServiceName, p.GroupName), cl, &p.SubscribeCallback)
	return c.syncSubscription(p.ServiceName, p.GroupName, cl)
}

// unsubscribe removes p's callback and, when it was the service's last,
// has the server's subscription removed. It does not wait for the server.
func (c *Client) unsubscribe(p *vo.SubscribeParam) error {
	cl := strings.Join(p.Clusters, ",")
	key := util.GetGroupName(p.ServiceName, p.GroupName)
	c.holder.DeregisterCallback(key, cl, &p.SubscribeCallback)
	if c.holder.IsSubscribed(key, cl) {
		return nil
	}
	c.holder.StopUpdateIfContain(key, cl)
	c.forgetRepair(key, cl)
	return c.syncSubscription(p.ServiceName, p.GroupName, cl)
}

// syncSubscription makes the server's subscription to the service follow
// what its callbacks want, on the service's goroutine (started unless it
// runs; told to look again if it does).
func (c *Client) syncSubscription(service, group, clusters string) error {
	id := util.GetGroupName(service, group) + "@@" + clusters
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errClientClosed
	}
	if s := c.syncing[id]; s != nil {
		s.dirty = true
		return nil
	}
	s := &subscriptionSync{}
	if c.syncing == nil {
		c.syncing = map[string]*subscriptionSync{}
	}
	c.syncing[id] = s
	c.done.Add(1)
	go c.runSubscriptionSync(id, s, service, group, clusters)
	return nil
}

func (c *Client) runSubscriptionSync(id string, s *subscriptionSync, service, group, clusters string) {
	defer c.done.Done()
	select {
	case <-c.built:
	case <-c.ctx.Done():
	}
	key := util.GetGroupName(service, group)
	for {
		if c.ctx.Err() != nil || c.naming == nil { // closed (both may be ready), or never built
			c.endSync(id)
			return
		}
		var err error
		if want := c.holder.IsSubscribed(key, clusters); want {
			err = c.sendSubscribe(c.naming, service, group, clusters)
		} else {
			err = c.naming.Unsubscribe(service, group, clusters)
		}
		if err != nil {
			// The SDK's redo sends the last of the two again once connected.
			c.cfg.logger.Debug("nacos: subscription change not acknowledged; the SDK sends it again when connected", "service", service, "err", firstLine(err))
		}
		c.mu.Lock()
		if !s.dirty {
			delete(c.syncing, id)
			c.mu.Unlock()
			return
		}
		s.dirty = false
		c.mu.Unlock()
	}
}

func (c *Client) endSync(id string) {
	c.mu.Lock()
	delete(c.syncing, id)
	c.mu.Unlock()
}

// sendSubscribe subscribes on the server and takes the list it answers.
func (c *Client) sendSubscribe(n *naming_grpc.NamingGrpcProxy, service, group, clusters string) error {
	svc, err := n.Subscribe(service, group, clusters)
	if err != nil {
		return err
	}
	c.holder.ProcessService(&svc)
	return nil
}
