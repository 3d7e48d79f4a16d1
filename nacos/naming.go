package nacos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients/cache"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client/naming_grpc"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/util"
)

// query reads a service's instances from the server (never from a cache).
func (c *Client) query(ctx context.Context, service, group string, clusters []string) ([]model.Instance, error) {
	cl := strings.Join(clusters, ",")
	svc, err := call(ctx, c, func(n *naming_grpc.NamingGrpcProxy) (*model.Service, error) {
		return n.QueryInstancesOfService(service, group, cl, 0, false)
	})
	if err != nil {
		return nil, err
	}
	if svc == nil {
		return nil, nil
	}
	c.repair(service, group, cl, svc)
	return svc.Hosts, nil
}

// repair replaces the SDK's cached list of a subscribed service with the
// server's: a push the SDK dropped as out of date would otherwise keep it
// stale, and the SDK compares the next push with it. The SDK gets a copy
// of its own, straight into its memory cache, not through its
// ProcessService, and repair reads none of the SDK's lists: the SDK sorts
// its cached list in place when the next push comes, and ProcessService
// writes a list to its disk cache (JSON) while the SDK's own push handling
// may run at once, so a list read, written or shared beside it was read
// while it was sorted (a crash in encoding/json). The disk cache gets a
// copy of its own too (writeDisk).
//
// A list repair gave the SDK before, which the SDK still holds (no push
// replaced it since: its LastRefTime is the one repair wrote), is not
// given again: every reconciliation reads every subscribed service, and
// writing each to the disk cache made a round take several milliseconds a
// service (5.5 ms measured here, where the query alone takes 0.7 ms), so
// that with thousands of services one round ran into the next.
func (c *Client) repair(service, group, clusters string, svc *model.Service) {
	key := util.GetGroupName(service, group)
	if !c.holder.IsSubscribed(key, clusters) {
		return
	}
	old, ok := c.holder.GetServiceInfo(service, group, clusters) // a copy of the struct: its LastRefTime is ours to read
	cacheKey := util.GetServiceCacheKey(key, clusters)
	digest := hostsDigest(svc.Hosts)
	c.mu.Lock()
	mark, marked := c.repaired[cacheKey]
	c.mu.Unlock()
	if ok && marked && mark.refTime == old.LastRefTime && mark.digest == digest {
		return
	}
	fresh := *svc
	fresh.Hosts = cloneHosts(svc.Hosts)
	fresh.Name, fresh.GroupName, fresh.Clusters = service, group, clusters
	if ok && fresh.LastRefTime <= old.LastRefTime {
		fresh.LastRefTime = old.LastRefTime + 1
	}
	c.holder.ServiceInfoMap.Store(cacheKey, fresh)
	c.holder.UpdateTimeMap.Store(cacheKey, uint64(util.CurrentMillis()))
	c.mu.Lock()
	if c.repaired == nil {
		c.repaired = map[string]repairMark{}
	}
	c.repaired[cacheKey] = repairMark{refTime: fresh.LastRefTime, digest: digest}
	c.mu.Unlock()
	disk := fresh
	disk.Hosts = cloneHosts(svc.Hosts)
	c.writeDisk(cacheKey, &disk)
}

// repairMark is what repair last gave the SDK for one service: the
// LastRefTime it wrote and a digest of the hosts.
type repairMark struct {
	refTime uint64
	digest  uint64
}

// hostsDigest hashes hosts (a list no one else holds) in any order.
func hostsDigest(hosts []model.Instance) uint64 {
	keys := make([]string, len(hosts))
	for i, h := range hosts {
		keys[i] = hostKey(h)
	}
	slices.Sort(keys)
	var d maphash.Hash
	d.SetSeed(digestSeed)
	for _, k := range keys {
		d.WriteString(k)
		d.WriteByte(0)
	}
	return d.Sum64()
}

var digestSeed = maphash.MakeSeed()

// forgetRepair drops repair's mark of a service no longer subscribed.
func (c *Client) forgetRepair(key, clusters string) {
	c.mu.Lock()
	delete(c.repaired, util.GetServiceCacheKey(key, clusters))
	c.mu.Unlock()
}

// writeDisk writes svc, a list no one else holds, to the SDK's disk cache
// file of cacheKey, as the SDK writes it, through a file renamed into
// place: the SDK may write the same file at once, and a restart reads a
// whole list either way. A failed write is logged: the SDK's next push
// writes it again.
func (c *Client) writeDisk(cacheKey string, svc *model.Service) {
	if c.diskDir == "" {
		return
	}
	b, err := json.Marshal(svc)
	if err == nil {
		err = os.MkdirAll(c.diskDir, 0o755)
	}
	var f *os.File
	if err == nil {
		f, err = os.CreateTemp(c.diskDir, ".graylb-*")
	}
	if err == nil {
		_, err = f.Write(b)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(f.Name(), cache.GetFileName(cacheKey, c.diskDir))
		}
		if err != nil {
			os.Remove(f.Name())
		}
	}
	if err != nil {
		c.cfg.logger.Warn("nacos: writing a repaired list to the disk cache failed", "err", err)
	}
}

// cloneHosts copies hosts and their metadata.
func cloneHosts(hosts []model.Instance) []model.Instance {
	out := slices.Clone(hosts)
	for i := range out {
		out[i].Metadata = maps.Clone(out[i].Metadata)
	}
	return out
}

// cached returns a copy of the SDK's cached list of a service: what the
// server pushed over the Client's connection, or the disk cache written
// from such pushes by an earlier process. It is read while the server
// cannot be reached, when no push sorts the list meanwhile.
func (c *Client) cached(service, group string, clusters []string) ([]model.Instance, bool) {
	svc, ok := c.holder.GetServiceInfo(service, group, strings.Join(clusters, ","))
	return cloneHosts(svc.Hosts), ok
}

func (c *Client) healthy() bool { return c.Healthy() }

// register registers one ephemeral instance; the SDK registers it again
// after each reconnection.
func (c *Client) register(ctx context.Context, service, group string, in model.Instance) error {
	key := util.GetGroupName(service, group)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return errClientClosed
	}
	if c.registered[key] {
		c.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrDuplicateRegistration, service)
	}
	c.registered[key] = true
	c.mu.Unlock()
	ok, err := call(ctx, c, func(n *naming_grpc.NamingGrpcProxy) (bool, error) { return n.RegisterInstance(service, group, in) })
	if err == nil && !ok {
		err = errors.New("refused by the server")
	}
	if err != nil {
		// The SDK must not register it again on reconnect: it forgets an
		// instance only when it deregisters it, which waits on the server
		// (up to its timeout when the server does not answer), so it goes
		// on in the background, ended by Close.
		c.mu.Lock()
		delete(c.registered, key)
		n := c.builtNaming()
		if n != nil && !c.closed {
			c.done.Add(1)
			go func() { defer c.done.Done(); n.DeregisterInstance(service, group, in) }()
		}
		c.mu.Unlock()
		return err
	}
	own := ownRegistration{service: service, group: group, in: in}
	c.mu.Lock()
	if c.registered[key] {
		c.own[key] = own
	}
	c.mu.Unlock()
	// Read back within the registration's ctx, 3 s at most (what a
	// restart must set right), then in the background if that was short.
	vctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := c.verify(vctx, own); err != nil {
		if ctx.Err() == nil && vctx.Err() == nil {
			c.cfg.logger.Error("nacos: the registered instance's metadata could not be set right", "err", err)
		} else {
			c.verifyAfter(own)
		}
	}
	return nil
}

// deregister removes one instance. Unlike a query it does not fail at
// once while the Client is disconnected: it waits for the connection until
// ctx ends or the Client closes (an error wrapping graylb.ErrClosed), so
// that a graceful stop during a server restart still tells the server;
// callTimeout bounds the call to the server once connected. Whatever
// happens, the SDK hears of it: the SDK registers every instance it
// registered again after each reconnection, and forgets one only when it
// deregisters it (even unsuccessfully).
func (c *Client) deregister(ctx context.Context, callTimeout time.Duration, service, group string, in model.Instance) error {
	key := util.GetGroupName(service, group)
	c.mu.Lock()
	delete(c.registered, key)
	delete(c.own, key)
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return errClientClosed
	}
	n := c.builtNaming()
	if n == nil { // not built yet: nothing can have been registered through it
		var err error
		if n, err = c.ready(ctx); err != nil {
			return err
		}
	}
	remove := func(n *naming_grpc.NamingGrpcProxy) (bool, error) { return n.DeregisterInstance(service, group, in) }
	if !c.waitConnected(ctx, n) {
		if ctx.Err() == nil { // the Client closed: the SDK forgot everything
			return fmt.Errorf("%w while not connected to %s", errClientClosed, strings.Join(c.cfg.servers, ","))
		}
		// Out of time: the SDK still has to forget the instance. Its call
		// fails within its own timeout (it retries for about 300 ms), and
		// succeeds if the connection came back meanwhile.
		c.mu.Lock()
		if !c.closed {
			c.done.Add(1)
			go func() { defer c.done.Done(); remove(n) }()
		}
		c.mu.Unlock()
		return fmt.Errorf("%w: not connected to %s: %w", ErrUnavailable, strings.Join(c.cfg.servers, ","), ctx.Err())
	}
	callCtx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	ok, err := callOn(callCtx, c, n, remove)
	if err != nil && ctx.Err() == nil && callCtx.Err() != nil {
		err = fmt.Errorf("no answer within %v: %w", callTimeout, err)
	}
	if err == nil && !ok {
		err = errors.New("refused by the server")
	}
	return err
}
