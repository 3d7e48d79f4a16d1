package nacos

import (
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/graylb/graylb"
	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/config_client"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
)

// ErrConfig: the options do not describe a usable Nacos client.
var ErrConfig = errors.New("nacos: invalid configuration")

// Option configures the clients this package builds.
type Option func(*config)

type config struct {
	servers     []string
	namespace   string
	group       string
	clusters    []string
	username    string
	password    string
	accessKey   string
	secretKey   string
	tls         *constant.TLSConfig
	timeout     time.Duration
	cacheDir    string
	logDir      string
	logLevel    string
	loadCache   bool
	logger      *slog.Logger
	naming      naming_client.INamingClient
	configCl    config_client.IConfigClient
	client      *Client
	reconcile   time.Duration
	refill      time.Duration
	connectWait time.Duration
	drainWait   time.Duration
	lb          *graylb.LoadBalancer // WithLoadBalancer
	quiet       time.Duration        // WithQuietPeriod
	drainMax    time.Duration        // WithDrainMax
	// recoverEvery is the period of the Supplier's catch-up over HTTP
	// while the connection is down (recover.go); zero turns it off.
	recoverEvery time.Duration
	// recoverPatience is how long the catch-up keeps its pace while the
	// server answers over HTTP and the SDK's connection stays down;
	// after it, the catch-up reads every recoverSlow (recover.go).
	recoverPatience, recoverSlow time.Duration
}

// DefaultReconcile is how often a Supplier re-reads each subscribed
// service from the server (see WithReconcile).
const DefaultReconcile = 15 * time.Second

// DefaultRefillWindow is how long after a connection change the registry
// counts as refilling (see Client.RefillUntil): long enough for every
// client to reconnect and register again after a server restart or the
// loss of a cluster node (5-7 s measured with a local Nacos-compatible
// server).
const DefaultRefillWindow = 10 * time.Second

// defaultDir is where the SDK's cache and log folders go unless set:
// os.UserCacheDir()/graylb/nacos, or the system's temporary folder when
// the user has no cache folder.
func defaultDir(sub string) string {
	base, err := os.UserCacheDir()
	if err != nil || base == "" {
		base = os.TempDir()
	}
	return filepath.Join(base, "graylb", "nacos", sub)
}

// ownCacheDir is the folder inside the cache folder dir in which the
// clients this package builds keep the SDK's disk cache:
// graylb-<hash of the sorted server addresses>. An SDK client built
// elsewhere in the process writes its lists under dir/naming itself, even
// when given the same folder, and its UDP push receiver accepts lists from
// anyone: sharing its files would let a forged push become graylb's list at
// the next start with Nacos unreachable. The name depends only on the
// servers, so the next start of the same program (or any graylb client of
// the same servers) finds the lists the previous one wrote, and a program
// pointed at other servers never starts from these.
func ownCacheDir(dir string, servers []string) string {
	s := slices.Clone(servers)
	slices.Sort(s)
	h := fnv.New64a()
	for _, a := range s {
		h.Write([]byte(a))
		h.Write([]byte{0})
	}
	return filepath.Join(dir, fmt.Sprintf("graylb-%016x", h.Sum64()))
}

func newConfig(opts []Option) *config {
	c := &config{
		servers:     []string{"127.0.0.1:8848"},
		group:       constant.DEFAULT_GROUP,
		timeout:     5 * time.Second,
		logLevel:    "error",
		loadCache:   true,
		logger:      slog.Default(),
		reconcile:   DefaultReconcile,
		refill:      DefaultRefillWindow,
		connectWait: 3 * time.Second,
		drainWait:   DefaultDrainWait,
		quiet:       DefaultQuietPeriod,
		drainMax:    DefaultDrainMax,

		recoverEvery:    recoverEvery,
		recoverPatience: recoverPatience,
		recoverSlow:     DefaultReconcile,
	}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	return c
}

// WithServers sets the Nacos servers, "host:port" each (HTTP port; the
// gRPC port is that plus 1000). Several addresses make a cluster. Default
// 127.0.0.1:8848.
func WithServers(addrs ...string) Option {
	return func(c *config) { c.servers = append([]string(nil), addrs...) }
}

// WithNamespace sets the namespace id (default public).
func WithNamespace(ns string) Option { return func(c *config) { c.namespace = ns } }

// WithGroup sets the group (default DEFAULT_GROUP).
func WithGroup(g string) Option {
	return func(c *config) {
		if g != "" {
			c.group = g
		}
	}
}

// WithClusters limits the instances to these clusters.
func WithClusters(clusters ...string) Option {
	return func(c *config) { c.clusters = append([]string(nil), clusters...) }
}

// WithCredentials sets the username and password. They are passed to the
// SDK only; they never appear in logs or errors.
func WithCredentials(username, password string) Option {
	return func(c *config) { c.username, c.password = username, password }
}

// WithAccessKey sets the access key and secret key (passed to the SDK only).
func WithAccessKey(accessKey, secretKey string) Option {
	return func(c *config) { c.accessKey, c.secretKey = accessKey, secretKey }
}

// WithTLS turns TLS on with the SDK's TLS settings.
func WithTLS(t constant.TLSConfig) Option {
	return func(c *config) {
		t.Appointed, t.Enable = true, true
		c.tls = &t
	}
}

// WithTimeout sets the SDK's request timeout (default 5s).
func WithTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// WithDrainWait sets how long Registration.Deregister waits after the
// server took the instance off its list (default DefaultDrainWait; zero
// does not wait; a negative d keeps the default). Longer than the time a
// push takes to reach every client, and shorter than the grace period the
// process gets to stop.
func WithDrainWait(d time.Duration) Option {
	return func(c *config) {
		if d >= 0 {
			c.drainWait = d
		}
	}
}

// WithLoadBalancer makes Register take from lb what the process's
// routing already says: the metadata keys of the gray flag and of the
// version (graylb.WithGrayKey, filter.WithVersionKey) and the process's
// kind (graylb.WithSelfGray). A Service whose GrayKey, Gray or the
// environment (EnvGray) says otherwise is refused (ErrMismatch). Its
// Deregister then also waits, after the drain wait, until no call has
// reached lb's server sides for the quiet period (WithQuietPeriod, at
// most WithDrainMax): callers that cache lists stop calling only when
// their cache expires.
func WithLoadBalancer(lb *graylb.LoadBalancer) Option { return func(c *config) { c.lb = lb } }

// WithQuietPeriod sets how long no call may have arrived before a
// Deregister of a Registration with WithLoadBalancer returns (default
// DefaultQuietPeriod; d <= 0 keeps it).
func WithQuietPeriod(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.quiet = d
		}
	}
}

// WithDrainMax bounds how long, from the removal, Deregister waits for
// callers to stop (default DefaultDrainMax; d <= 0 keeps it).
func WithDrainMax(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.drainMax = d
		}
	}
}

// WithCacheDir sets the SDK's disk cache folder, from which a process
// started while Nacos is unreachable serves its first lists (default
// os.UserCacheDir()/graylb/nacos/cache). The clients this package builds
// keep their files in a folder of their own inside it,
// graylb-<hash of the server addresses>, that no SDK client built
// elsewhere writes (see Client), so dir may be shared. The SDK writes
// instance lists there in plain text.
func WithCacheDir(dir string) Option { return func(c *config) { c.cacheDir = dir } }

// WithLogDir makes the SDK write its log to rotating files in dir instead
// of handing its lines to graylb's logger (see Client). Without it the SDK
// writes no log file (its folder setting points at
// os.UserCacheDir()/graylb/nacos/log, never beside the executable). The SDK
// keeps one logger per process: the last Client built sets it.
func WithLogDir(dir string) Option { return func(c *config) { c.logDir = dir } }

// WithLogLevel sets the lowest level of the SDK's log lines kept: debug,
// info, warn or error (default error; at warn the SDK logs about 1.6 MB
// per 30 s while the server is unreachable).
func WithLogLevel(level string) Option { return func(c *config) { c.logLevel = level } }

// WithClient makes NewSupplier, NewRuleSource and Register use c, one
// connection shared by all of them; their Close then leaves c open. The
// Client's options (servers, namespace, credentials, folders) apply; the
// group, clusters and logger still come from the other options.
func WithClient(c *Client) Option { return func(cfg *config) { cfg.client = c } }

// WithReconcile sets how often a Supplier re-reads every subscribed
// service from the server and hands over the list when it differs from
// the last one (default DefaultReconcile; zero or less turns it off). It
// repairs lists a lost or dropped push left stale.
func WithReconcile(d time.Duration) Option { return func(c *config) { c.reconcile = d } }

// WithRefillWindow sets how long after a connection change the registry
// counts as refilling (default DefaultRefillWindow; see Client.RefillUntil).
func WithRefillWindow(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.refill = d
		}
	}
}

// WithoutDiskCacheAtStart does not load the SDK's disk cache at start.
func WithoutDiskCacheAtStart() Option { return func(c *config) { c.loadCache = false } }

// WithLogger sets graylb's logger for this package (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// WithNamingClient uses an existing SDK naming client instead of building
// one; Close then leaves it open.
//
// Such a client reads instance lists from its own cache, which its UDP
// push receiver (no authentication, every interface) also writes: lists
// can then come from anyone who can send it a datagram. Its Subscribe and
// Unsubscribe wait for the server's answer: the Supplier calls them in
// the background, in order for each service, so that Watch, a watcher's
// stop and Close never wait on the server; a call the server does not
// answer ends at the SDK's timeout, which may be after Close returned.
// Prefer WithClient, whose lists come only from the server.
func WithNamingClient(nc naming_client.INamingClient) Option {
	return func(c *config) { c.naming = nc }
}

// WithConfigClient uses an existing SDK config client for the rule source.
func WithConfigClient(cc config_client.IConfigClient) Option {
	return func(c *config) { c.configCl = cc }
}

func (c *config) params() (vo.NacosClientParam, error) {
	if len(c.servers) == 0 {
		return vo.NacosClientParam{}, fmt.Errorf("%w: no server address", ErrConfig)
	}
	scs := make([]constant.ServerConfig, 0, len(c.servers))
	for _, a := range c.servers {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			return vo.NacosClientParam{}, fmt.Errorf("%w: server %q: %v", ErrConfig, a, err)
		}
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil || p == 0 || p > 64535 || host == "" {
			return vo.NacosClientParam{}, fmt.Errorf("%w: server %q: want host:port with a port below 64536", ErrConfig, a)
		}
		sc := *constant.NewServerConfig(host, p, constant.WithContextPath("/nacos"))
		sc.GrpcPort = p + constant.RpcPortOffset
		scs = append(scs, sc)
	}
	opts := []constant.ClientOption{
		constant.WithNamespaceId(c.namespace),
		constant.WithTimeoutMs(uint64(c.timeout / time.Millisecond)),
		constant.WithNotLoadCacheAtStart(!c.loadCache),
		// graylb's Cache decides about empty lists (see graylb.Cache): the
		// SDK must hand them over rather than drop them (#781).
		constant.WithUpdateCacheWhenEmpty(true),
		constant.WithLogLevel(c.logLevel),
		constant.WithUsername(c.username),
		constant.WithPassword(c.password),
		constant.WithAccessKey(c.accessKey),
		constant.WithSecretKey(c.secretKey),
	}
	cacheDir, logDir := c.cacheDir, c.logDir
	if cacheDir == "" {
		cacheDir = defaultDir("cache")
	}
	if logDir == "" {
		logDir = defaultDir("log")
	}
	opts = append(opts, constant.WithCacheDir(ownCacheDir(cacheDir, c.servers)), constant.WithLogDir(logDir))
	if c.tls != nil {
		opts = append(opts, constant.WithTLS(*c.tls))
	}
	return vo.NacosClientParam{ClientConfig: constant.NewClientConfig(opts...), ServerConfigs: scs}, nil
}

func (c *config) configClient() (config_client.IConfigClient, bool, error) {
	if c.configCl != nil {
		return c.configCl, false, nil
	}
	p, err := c.params()
	if err != nil {
		return nil, false, err
	}
	cc, err := clients.NewConfigClient(p)
	// The SDK installed a rotating file logger of its own: hand its lines
	// to graylb's logger again unless WithLogDir asked for files.
	if _, lerr := installSDKLogger(c, *p.ClientConfig); lerr != nil && err == nil {
		err = lerr
	}
	if err != nil {
		return nil, false, fmt.Errorf("nacos: config client: %w", redact(err, c))
	}
	return cc, true, nil
}

// redact replaces any credential that an SDK error might quote.
func redact(err error, c *config) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	changed := false
	for _, secret := range []string{c.password, c.secretKey, c.accessKey} {
		if len(secret) >= 3 && strings.Contains(msg, secret) {
			msg = strings.ReplaceAll(msg, secret, "[redacted]")
			changed = true
		}
	}
	if !changed {
		return err
	}
	return errors.New(msg)
}
