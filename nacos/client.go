package nacos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/config_client"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client/naming_cache"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client/naming_grpc"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/common/http_agent"
	sdklog "github.com/nacos-group/nacos-sdk-go/v2/common/logger"
	"github.com/nacos-group/nacos-sdk-go/v2/common/nacos_server"
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
// Close releases what the SDK lets go of: no goroutine and no file
// descriptor is left, but for what docs/nacos.md lists.
type Client struct {
	cfg    *config
	ctx    context.Context
	cancel context.CancelFunc
	holder *naming_cache.ServiceInfoHolder
	// diskDir is the holder's disk cache folder (repair writes there).
	diskDir string
	params  vo.NacosClientParam
	start   time.Time
	sdkLog  sdklog.Logger

	built     chan struct{} // closed once naming and buildErr are set
	naming    *naming_grpc.NamingGrpcProxy
	server    *nacos_server.NacosServer // its login holds the HTTP API's access token
	lister    *httpLister               // lists over HTTP while the connection is down (httplist.go)
	closeOnce sync.Once                 // closes naming
	buildErr  error
	connected chan struct{} // closed on the first connection
	trouble   atomic.Int64  // unix nanos of the last connection change seen
	done      sync.WaitGroup

	mu         sync.Mutex
	closed     bool
	configCl   config_client.IConfigClient
	registered map[string]bool
	own        map[string]ownRegistration   // registered and answered, read back after reconnections (readback.go)
	syncing    map[string]*subscriptionSync // services whose subscription is being sent (subscription.go)
	// repaired is, per cache key of a subscribed service, what repair last
	// gave the SDK (naming.go): a query answering that same list while the
	// SDK still holds it repairs nothing.
	repaired map[string]repairMark
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
	lister, err := newHTTPLister(cfg)
	if err != nil {
		return nil, err
	}
	sdkLog, err := installSDKLogger(cfg, cc)
	if err != nil {
		return nil, fmt.Errorf("nacos: SDK logger: %w", err)
	}
	cctx, cancel := context.WithCancel(context.Background())
	c := &Client{
		cfg: cfg, ctx: cctx, cancel: cancel, params: p, start: time.Now(), sdkLog: sdkLog,
		holder:     naming_cache.NewServiceInfoHolder(cc.NamespaceId, cc.CacheDir, true, cc.NotLoadCacheAtStart),
		diskDir:    cc.CacheDir + string(os.PathSeparator) + "naming" + string(os.PathSeparator) + cc.NamespaceId, // as the holder names it
		built:      make(chan struct{}),
		lister:     lister,
		connected:  make(chan struct{}),
		registered: map[string]bool{},
		own:        map[string]ownRegistration{},
	}
	// The SDK connects inside its constructor and retries there, whatever
	// its ctx says (3 attempts, each up to its timeout): build it in the
	// background so that nothing here waits past ctx, and so that Close
	// need not wait for it either (a build that ends after Close closes
	// what it built).
	go func() {
		defer close(c.built)
		agent := &http_agent.HttpAgent{TlsConfig: cc.TLSCfg}
		srv, err := nacos_server.NewNacosServer(cctx, p.ServerConfigs, cc, agent, cc.TimeoutMs, cc.Endpoint,
			map[string][]string{"Client-Version": {constant.CLIENT_VERSION}, "User-Agent": {constant.CLIENT_VERSION}, "Request-Module": {"Naming"}})
		if err == nil {
			c.server = srv
			c.naming, err = naming_grpc.NewNamingGrpcProxy(cctx, cc, srv, c.holder)
		}
		if err != nil {
			c.buildErr = fmt.Errorf("nacos: naming client: %w", redact(err, cfg))
			return
		}
		c.mu.Lock()
		closed := c.closed
		if !closed {
			c.done.Add(1)
		}
		c.mu.Unlock()
		if closed {
			c.closeNaming()
			return
		}
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
// within the SDK's retries (about 300 ms). A connection still being set
// up (the SDK's constructor retries for up to three of its timeouts,
// whatever the server does) is not waited for: it is closed as soon as
// the SDK hands it over.
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
	if isClosed(c.built) { // else the build closes what it built
		c.closeNaming()
	}
	if cc != nil {
		cc.CloseClient()
	}
	c.done.Wait()
	return nil
}

// closeNaming closes the naming client, once; it is built.
func (c *Client) closeNaming() {
	c.closeOnce.Do(func() {
		if c.naming != nil {
			c.naming.CloseClient()
		}
	})
}
