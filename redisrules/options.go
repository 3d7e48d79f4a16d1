package redisrules

import (
	"fmt"
	"log/slog"
	"time"
)

// Default key names. The braces are a Redis Cluster hash tag: every key
// named "{graylb}..." lives in the same hash slot, so the keys are read in
// one transaction on one node, and their keyspace notifications are
// published by that node.
const (
	// DefaultSwitchKey is the switch of the three-key layout: a string,
	// "true" (in any letter case) turns gray routing on.
	DefaultSwitchKey = "{graylb}:gray:switch"
	// DefaultUsersKey is the list of gray user ids of the three-key layout.
	DefaultUsersKey = "{graylb}:gray:users"
	// DefaultAddressesKey is the list of gray instance addresses (host or
	// host:port) of the three-key layout.
	DefaultAddressesKey = "{graylb}:gray:addresses"
	// DefaultDocumentKey is the key WithDocument reads when given "".
	DefaultDocumentKey = "{graylb}:rules"
)

// Defaults of the options.
const (
	// DefaultPollInterval is how often the keys are read.
	DefaultPollInterval = time.Second
	// DefaultTimeout bounds each round trip to Redis.
	DefaultTimeout = 2 * time.Second
	// DefaultMaxEntries is the most entries a gray list may hold.
	DefaultMaxEntries = 100_000
)

// maxKeyLen bounds a key name (they appear in log lines and errors).
const maxKeyLen = 1024

// Notifications says whether the RuleSource follows changes by Redis
// keyspace notifications on top of polling.
type Notifications int

const (
	// NotifyAuto (the default) subscribes to the keys' keyspace
	// notifications when the server publishes them (its
	// notify-keyspace-events setting holds K), and polls only otherwise.
	NotifyAuto Notifications = iota
	// NotifyOff never subscribes: changes are seen by polling alone.
	NotifyOff
	// NotifyEnable adds the keyspace events the RuleSource needs to the
	// server's notify-keyspace-events setting (CONFIG SET, keeping the
	// classes already on; on a Cluster, on every master), then subscribes.
	// It changes the server's configuration for every client: use it only
	// on a Redis the application owns.
	NotifyEnable
)

func (n Notifications) String() string {
	switch n {
	case NotifyAuto:
		return "auto"
	case NotifyOff:
		return "off"
	case NotifyEnable:
		return "enable"
	}
	return fmt.Sprintf("Notifications(%d)", int(n))
}

// Option configures a RuleSource.
type Option func(*config)

type config struct {
	layout     layout
	layoutSet  int // how many layout options were given
	interval   time.Duration
	timeout    time.Duration
	maxEntries int
	notify     Notifications
	logger     *slog.Logger
}

// WithKeys chooses the three-key layout (the default) under other key
// names: switchKey holds a string, "true" in any letter case turning gray
// routing on and anything else, or no key, turning it off (Rules.Enabled
// false: every instance serves every request); usersKey holds a list of gray
// user ids (Rules.GrayUsers); addressesKey holds a list of gray instance
// addresses, each a host or host:port (Rules.GrayAddresses). A missing list
// is an empty one. An empty name keeps that key's default. On a Redis
// Cluster, give the three names one hash tag ("{app}:switch", ...) so they
// are read in one transaction and notified by one node.
func WithKeys(switchKey, usersKey, addressesKey string) Option {
	return func(c *config) {
		c.layoutSet++
		c.layout = &threeKeys{
			switchKey: orDefault(switchKey, DefaultSwitchKey),
			usersKey:  orDefault(usersKey, DefaultUsersKey),
			addrsKey:  orDefault(addressesKey, DefaultAddressesKey),
		}
	}
}

// WithDocument chooses the document layout: key (DefaultDocumentKey when
// "") holds a JSON rule document, the format of graylb.ParseRules, with its
// validation. A missing key loads as the zero Rules; a key removed while
// watching keeps the current rules.
func WithDocument(key string) Option {
	return func(c *config) {
		c.layoutSet++
		c.layout = &document{key: orDefault(key, DefaultDocumentKey)}
	}
}

// WithPollInterval sets how often the keys are read (DefaultPollInterval
// when d <= 0). A change is in force within one interval, sooner with
// keyspace notifications.
func WithPollInterval(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.interval = d
		}
	}
}

// WithTimeout bounds each round trip to Redis (DefaultTimeout when d <= 0).
func WithTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// WithMaxEntries caps the entries of each gray list (DefaultMaxEntries when
// n <= 0); a longer list is refused. Independently, the lists together may
// hold at most graylb.MaxRulesSize bytes.
func WithMaxEntries(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.maxEntries = n
		}
	}
}

// WithNotifications chooses whether keyspace notifications are used
// (default NotifyAuto). Polling runs in every mode: notifications are
// fire-and-forget, and the ones sent while the subscription reconnects are
// lost. Each Watch holds one subscription connection: on a Cluster, one per
// master that publishes the events.
func WithNotifications(n Notifications) Option {
	return func(c *config) { c.notify = n }
}

// WithLogger sets the logger for outages, refused content and the way
// changes are followed (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

func newConfig(opts []Option) (config, error) {
	c := config{
		interval:   DefaultPollInterval,
		timeout:    DefaultTimeout,
		maxEntries: DefaultMaxEntries,
		logger:     slog.Default(),
	}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.layoutSet > 1 {
		return c, fmt.Errorf("%w: choose one layout: WithKeys or WithDocument, once", ErrInvalidOption)
	}
	if c.layout == nil {
		WithKeys("", "", "")(&c)
	}
	if c.notify < NotifyAuto || c.notify > NotifyEnable {
		return c, fmt.Errorf("%w: unknown notifications mode %v", ErrInvalidOption, c.notify)
	}
	keys := c.layout.keys()
	for i, k := range keys {
		if err := validateKey(k); err != nil {
			return c, err
		}
		for _, o := range keys[:i] {
			if o == k {
				return c, fmt.Errorf("%w: key %q given twice", ErrInvalidOption, k)
			}
		}
	}
	return c, nil
}

// validateKey refuses key names that would break a log line or a channel
// pattern: control characters, or more than maxKeyLen bytes.
func validateKey(k string) error {
	if len(k) > maxKeyLen {
		return fmt.Errorf("%w: key name of %d bytes, at most %d", ErrInvalidOption, len(k), maxKeyLen)
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < ' ' || c == 0x7f {
			return fmt.Errorf("%w: key name %q holds a control character", ErrInvalidOption, k)
		}
	}
	return nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
