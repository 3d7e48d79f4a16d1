package nacos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/graylb/graylb"
	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/config_client"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client/naming_cache"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client/naming_grpc"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/common/http_agent"
	sdklog "github.com/nacos-group/nacos-sdk-go/v2/common/logger"
	"github.com/nacos-group/nacos-sdk-go/v2/common/nacos_server"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/util"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
)

// ErrUnavailable: the Nacos server cannot be reached and there is no
// list to serve instead.
var ErrUnavailable = errors.New("nacos: server unavailable")

// ErrDuplicateRegistration: a Client already holds a registration of that
// service. Nacos 2 keeps one registration per connection and service (a
// second replaces the first), so each instance needs a Client of its own.
var ErrDuplicateRegistration = errors.New("nacos: the client already registered an instance of this service")

// Client is one connection to a Nacos server configuration (servers,
// namespace, credentials), shared by every Supplier, RuleSource and
// Registration given it through WithClient. Build one per configuration
// and process; it holds no global state of its own.
//
// Its naming side speaks gRPC only: unlike the SDK's naming client it
// starts no UDP push receiver, so instance lists come from the server over
// the Client's own connection and nowhere else. The config side (rule
// documents) is the SDK's config client, built on first use.
//
// Its disk cache (the lists a process started while the server is
// unreachable serves) is its own: a folder inside the cache folder named
// after the servers (see WithCacheDir) that no SDK client built elsewhere
// in the process writes, so a list such a client accepted from its UDP
// receiver never becomes this Client's list at a restart.
//
// A Client watches its connection and the configured servers and reports
// registry refills (see RefillUntil), which the graylb.Cache uses to tell a
// registry refilling after a restart from deliberate deregistrations.
//
// The SDK's log lines go to graylb's logger (WithLogger) from the SDK level
// on (WithLogLevel, default error); with WithLogDir they go to the SDK's
// rotating files in that folder instead. The SDK's logger is process-wide:
// the last Client built sets it.
//
// Close releases what the SDK lets go of. Measured per NewClient and Close
// with nacos-sdk-go v2.3.0 and v2.3.2 (TestIntegration_CloseLeaks): no goroutine and
// no file descriptor is left. The SDK keeps each gRPC client in a
// process-wide map it never prunes (a few kilobytes per Client); with
// WithLogDir, each Client's rotating log writer keeps one goroutine and
// its open file once it has written.
type Client struct {
	cfg    *config
	ctx    context.Context
	cancel context.CancelFunc
	holder *naming_cache.ServiceInfoHolder
	params vo.NacosClientParam
	start  time.Time
	sdkLog sdklog.Logger

	built     chan struct{} // closed once naming and buildErr are set
	naming    *naming_grpc.NamingGrpcProxy
	buildErr  error
	connected chan struct{} // closed on the first connection
	trouble   atomic.Int64  // unix nanos of the last connection change seen
	done      sync.WaitGroup

	mu         sync.Mutex
	closed     bool
	configCl   config_client.IConfigClient
	registered map[string]bool
}

// NewClient builds a Client and waits until it is connected, ctx is done
// or the connect wait passes (the smaller of WithTimeout and 3 s),
// whichever comes first. A server that cannot be reached is no error: the
// Client keeps connecting in the background and its Suppliers serve the
// SDK's disk cache meanwhile. Errors wrap ErrConfig for options that do
// not describe a usable client.
func NewClient(ctx context.Context, opts ...Option) (*Client, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	cfg := newConfig(opts)
	if cfg.client != nil {
		return nil, fmt.Errorf("%w: WithClient given to NewClient", ErrConfig)
	}
	p, err := cfg.params()
	if err != nil {
		return nil, err
	}
	cc := *p.ClientConfig
	if cc.NamespaceId == "" {
		cc.NamespaceId = constant.DEFAULT_NAMESPACE_ID
	}
	sdkLog, err := installSDKLogger(cfg, cc)
	if err != nil {
		return nil, fmt.Errorf("nacos: SDK logger: %w", err)
	}
	cctx, cancel := context.WithCancel(context.Background())
	c := &Client{
		cfg: cfg, ctx: cctx, cancel: cancel, params: p, start: time.Now(), sdkLog: sdkLog,
		holder:     naming_cache.NewServiceInfoHolder(cc.NamespaceId, cc.CacheDir, true, cc.NotLoadCacheAtStart),
		built:      make(chan struct{}),
		connected:  make(chan struct{}),
		registered: map[string]bool{},
	}
	// The SDK connects inside its constructor and retries there: build it
	// in the background so that nothing here waits past ctx.
	c.done.Add(1)
	go func() {
		defer c.done.Done()
		defer close(c.built)
		agent := &http_agent.HttpAgent{TlsConfig: cc.TLSCfg}
		srv, err := nacos_server.NewNacosServer(cctx, p.ServerConfigs, cc, agent, cc.TimeoutMs, cc.Endpoint,
			map[string][]string{"Client-Version": {constant.CLIENT_VERSION}, "User-Agent": {constant.CLIENT_VERSION}, "Request-Module": {"Naming"}})
		if err == nil {
			c.naming, err = naming_grpc.NewNamingGrpcProxy(cctx, cc, srv, c.holder)
		}
		if err != nil {
			c.buildErr = fmt.Errorf("nacos: naming client: %w", redact(err, cfg))
			return
		}
		c.done.Add(1)
		go c.watchConnection()
	}()
	wait, stop := context.WithTimeout(ctx, min(cfg.timeout, cfg.connectWait))
	defer stop()
	select {
	case <-c.connected:
	case <-wait.Done():
	}
	return c, nil
}

// watchConnection polls the connection's state and, with several servers,
// whether each answers, and records every change as the start of a refill.
func (c *Client) watchConnection() {
	defer c.done.Done()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	ever := false
	up := map[string]bool{}
	probeEvery, n := 5, 0 // servers: every 500 ms
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-tick.C:
		}
		if c.naming.ServerHealthy() {
			if !ever {
				ever = true
				close(c.connected)
			}
		} else if ever {
			c.trouble.Store(time.Now().UnixNano())
		}
		if n++; len(c.params.ServerConfigs) > 1 && n%probeEvery == 0 {
			for _, sc := range c.params.ServerConfigs {
				addr := net.JoinHostPort(sc.IpAddr, strconv.FormatUint(sc.GrpcPort, 10))
				ok := answers(c.ctx, addr)
				if was, seen := up[addr]; seen && was != ok {
					c.trouble.Store(time.Now().UnixNano())
					c.cfg.logger.Warn("nacos: a server changed state; the registry may refill", "server", addr, "up", ok)
				}
				up[addr] = ok
			}
		}
	}
}

// answers reports whether addr accepts a TCP connection within 300 ms.
func answers(ctx context.Context, addr string) bool {
	d := net.Dialer{Timeout: 300 * time.Millisecond}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// RefillUntil returns the end of the current refill window: the refill
// window (WithRefillWindow) after the last time the Client saw its
// connection down or a configured server change state (once connected).
// A registry that restarted, or lost a cluster node, shows its clients'
// instances again only as they reconnect and register anew; the
// graylb.Cache holds lists that lost a whole kind of instance until then.
// Zero when nothing changed since the Client connected.
func (c *Client) RefillUntil() time.Time {
	t := c.trouble.Load()
	if t == 0 {
		return time.Time{}
	}
	return time.Unix(0, t).Add(c.cfg.refill)
}

// Healthy reports whether the Client is connected to a server.
func (c *Client) Healthy() bool {
	select {
	case <-c.built:
		return c.naming != nil && c.naming.ServerHealthy()
	default:
		return false
	}
}

// naming waits until the Client is usable: built, and connected unless it
// has been trying for longer than the connect wait. It fails at once when
// the Client has been disconnected since then.
func (c *Client) ready(ctx context.Context) (*naming_grpc.NamingGrpcProxy, error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, errClientClosed
	}
	// A Client older than its connect wait has a deadline in the past: a
	// select over "built" and "deadline passed" would then pick either at
	// random. What is ready is checked first, the deadline only when it is
	// not.
	if !isClosed(c.built) {
		deadline := c.start.Add(min(c.cfg.timeout, c.cfg.connectWait))
		wait, stop := context.WithDeadline(ctx, deadline)
		select {
		case <-c.built:
		case <-wait.Done():
		}
		stop()
		if !isClosed(c.built) {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("%w: connecting to %s", ErrUnavailable, strings.Join(c.cfg.servers, ","))
		}
	}
	if c.buildErr != nil {
		return nil, c.buildErr
	}
	if c.naming.ServerHealthy() {
		return c.naming, nil
	}
	if !isClosed(c.connected) {
		deadline := c.start.Add(min(c.cfg.timeout, c.cfg.connectWait))
		wait, stop := context.WithDeadline(ctx, deadline)
		select {
		case <-c.connected:
		case <-wait.Done():
		}
		stop()
	}
	if !c.naming.ServerHealthy() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: not connected to %s", ErrUnavailable, strings.Join(c.cfg.servers, ","))
	}
	return c.naming, nil
}

// errClientClosed: the Client was closed. It wraps graylb.ErrClosed, as
// the Supplier's errors after Close do.
var errClientClosed = fmt.Errorf("nacos: client: %w", graylb.ErrClosed)

// isClosed reports whether ch is closed, without waiting.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// call runs fn on the connected naming client, honouring ctx (the SDK's
// calls honour only its own timeout).
func call[T any](ctx context.Context, c *Client, fn func(*naming_grpc.NamingGrpcProxy) (T, error)) (T, error) {
	n, err := c.ready(ctx)
	if err != nil {
		var zero T
		return zero, err
	}
	return callOn(ctx, c, n, fn)
}

// callOn runs fn on n, honouring ctx: when ctx ends first, fn goes on in
// the background until the SDK's own timeout, or until Close, which closes
// the connection and waits for it.
func callOn[T any](ctx context.Context, c *Client, n *naming_grpc.NamingGrpcProxy, fn func(*naming_grpc.NamingGrpcProxy) (T, error)) (T, error) {
	var zero T
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return zero, errClientClosed
	}
	c.done.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.done.Done()
		v, err := fn(n)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		select {
		case r := <-done: // finished as ctx ended: the answer stands
			return r.v, r.err
		default:
			return zero, ctx.Err()
		}
	}
}

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

// repair replaces the SDK's cached list of a service with the server's
// when they differ: a push the SDK dropped as out of date would otherwise
// keep it stale until the next change.
func (c *Client) repair(service, group, clusters string, svc *model.Service) {
	key := util.GetGroupName(service, group)
	if !c.holder.IsSubscribed(key, clusters) {
		return
	}
	old, ok := c.holder.GetServiceInfo(service, group, clusters)
	if ok && sameHosts(old.Hosts, svc.Hosts) {
		return
	}
	fresh := *svc
	fresh.Name, fresh.GroupName, fresh.Clusters = service, group, clusters
	if ok && fresh.LastRefTime <= old.LastRefTime {
		fresh.LastRefTime = old.LastRefTime + 1
	}
	c.holder.ProcessService(&fresh)
}

// cached returns the SDK's cached list of a service: what the server
// pushed over the Client's connection, or the disk cache written from
// such pushes by an earlier process.
func (c *Client) cached(service, group string, clusters []string) ([]model.Instance, bool) {
	svc, ok := c.holder.GetServiceInfo(service, group, strings.Join(clusters, ","))
	return svc.Hosts, ok
}

// subscribe registers p's callback and subscribes to the service. When
// the Client is not connected yet the subscription goes out in the
// background; the SDK sends it again after every reconnection.
func (c *Client) subscribe(p *vo.SubscribeParam) error {
	cl := strings.Join(p.Clusters, ",")
	c.holder.RegisterCallback(util.GetGroupName(p.ServiceName, p.GroupName), cl, &p.SubscribeCallback)
	send := func(n *naming_grpc.NamingGrpcProxy) error {
		svc, err := n.Subscribe(p.ServiceName, p.GroupName, cl)
		if err != nil {
			return err
		}
		c.holder.ProcessService(&svc)
		return nil
	}
	if n := c.builtNaming(); n != nil && n.ServerHealthy() {
		return send(n)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return errClientClosed
	}
	c.done.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.done.Done()
		select {
		case <-c.built:
		case <-c.ctx.Done():
		}
		if c.ctx.Err() != nil { // closed: both may be ready
			return
		}
		if c.naming != nil {
			if err := send(c.naming); err != nil {
				c.cfg.logger.Debug("nacos: subscribe deferred until the client connects", "service", p.ServiceName, "err", firstLine(err))
			}
		}
	}()
	return nil
}

// unsubscribe removes p's callback and, when it was the service's last,
// the subscription.
func (c *Client) unsubscribe(p *vo.SubscribeParam) error {
	cl := strings.Join(p.Clusters, ",")
	key := util.GetGroupName(p.ServiceName, p.GroupName)
	c.holder.DeregisterCallback(key, cl, &p.SubscribeCallback)
	if c.holder.IsSubscribed(key, cl) {
		return nil
	}
	select {
	case <-c.built:
	default:
		return nil
	}
	if c.naming == nil {
		return nil
	}
	c.holder.StopUpdateIfContain(key, cl)
	return c.naming.Unsubscribe(p.ServiceName, p.GroupName, cl)
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
		c.mu.Lock()
		delete(c.registered, key)
		c.mu.Unlock()
		if n := c.builtNaming(); n != nil { // do not register it again on reconnect
			n.DeregisterInstance(service, group, in)
		}
		return err
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

// waitConnected waits until n is connected or ctx ends, the Client closes;
// it reports whether n is connected. A connection that is there wins over
// a ctx that ended.
func (c *Client) waitConnected(ctx context.Context, n *naming_grpc.NamingGrpcProxy) bool {
	if n.ServerHealthy() {
		return true
	}
	tick := time.NewTicker(50 * time.Millisecond) // the SDK offers no connection event
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-ctx.Done():
		case <-c.ctx.Done():
		}
		if n.ServerHealthy() {
			return true
		}
		if ctx.Err() != nil || c.ctx.Err() != nil {
			return false
		}
	}
}

func (c *Client) builtNaming() *naming_grpc.NamingGrpcProxy {
	select {
	case <-c.built:
		return c.naming
	default:
		return nil
	}
}

// configClient returns the SDK config client, built on first use.
func (c *Client) configClient() (config_client.IConfigClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errClientClosed
	}
	if c.configCl != nil {
		return c.configCl, nil
	}
	cc, err := clients.NewConfigClient(c.params)
	sdklog.SetLogger(c.sdkLog) // the config client installed a rotating file logger of its own
	if err != nil {
		return nil, fmt.Errorf("nacos: config client: %w", redact(err, c.cfg))
	}
	c.configCl = cc
	return cc, nil
}

// Close closes the connection and the config client. Suppliers,
// RuleSources and Registrations built on the Client stop working; close
// them first. Close waits for the Client's goroutines, calls to the server
// their callers gave up on included: closing the connection ends them
// within the SDK's retries (about 300 ms).
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	cc := c.configCl
	c.mu.Unlock()
	c.cancel()
	<-c.built
	if c.naming != nil {
		c.naming.CloseClient()
	}
	if cc != nil {
		cc.CloseClient()
	}
	c.done.Wait()
	return nil
}

// sameHosts reports whether two host lists hold the same instances with
// the same state, in any order.
func sameHosts(a, b []model.Instance) bool {
	if len(a) != len(b) {
		return false
	}
	fa, fb := make([]string, len(a)), make([]string, len(b))
	for i := range a {
		fa[i], fb[i] = hostKey(a[i]), hostKey(b[i])
	}
	return sameSet(fa, fb)
}
