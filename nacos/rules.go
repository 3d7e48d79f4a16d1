package nacos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
)

// configClient is the part of the SDK's config client the RuleSource uses.
type configClient interface {
	GetConfig(param vo.ConfigParam) (string, error)
	ListenConfig(param vo.ConfigParam) error
	CancelListenConfig(param vo.ConfigParam) error
}

// DefaultRulesDataID is the data id of the rule document.
const DefaultRulesDataID = "graylb-rules.json"

// RuleSource is a graylb.RuleSource over Nacos config: a JSON rule
// document (see graylb.Rules) under a data id and group, reloaded live
// through the SDK's config listener. A document that does not parse or
// validate is refused with a logged error, reported to OnRefused's
// functions (so a LoadBalancer's RulesState counts it); the previous rules
// stay in force. On a Client (WithClient) it also reads the document over
// the server's HTTP API while the Client's connection is down and for
// 10 s after, so that a change made during an outage applies as soon as
// the server answers (see rulescatchup.go); Close ends those reads.
type RuleSource struct {
	client  configClient
	closeFn func()
	dataID  string
	group   string
	logger  *slog.Logger
	where   string // Describe's text

	refusals adapter.Watchers[func(error)]
	watches  adapter.Watchers[*ruleWatch]

	// The catch-up over HTTP (rulescatchup.go), on a Client only.
	stop      chan struct{}
	closeOnce sync.Once
	done      sync.WaitGroup
	life      context.Context // ends with Close: a read in flight ends
	endLife   context.CancelFunc
}

// NewRuleSource returns a RuleSource for dataID (DefaultRulesDataID when
// empty) in the group of the options, on the config client of the Client
// given by WithClient, or on an SDK config client of its own (closed by
// Close).
func NewRuleSource(dataID string, opts ...Option) (*RuleSource, error) {
	c := newConfig(opts)
	var cc configClient
	owned := false
	var err error
	if c.client != nil {
		cc, err = c.client.configClient()
	} else {
		cc, owned, err = c.configClient()
	}
	if err != nil {
		return nil, err
	}
	if dataID == "" {
		dataID = DefaultRulesDataID
	}
	r := &RuleSource{client: cc, dataID: dataID, group: c.group, logger: c.logger, where: c.describeRules(dataID), stop: make(chan struct{})}
	r.life, r.endLife = context.WithCancel(context.Background())
	if owned {
		r.closeFn = cc.(interface{ CloseClient() }).CloseClient
	}
	if c.client != nil && c.recoverEvery > 0 {
		var closed <-chan struct{} // nil (never) for a Client not built by NewClient
		if c.client.ctx != nil {
			closed = c.client.ctx.Done()
		}
		r.done.Add(1)
		go r.catchUpLoop(c.client, closed, c.recoverEvery, rulesCatchUpAfter)
	}
	return r, nil
}

// Describe says where the rule document is, as the Nacos console shows it
// (see graylb.RuleSource): "nacos config <group>/<dataId>", the namespace
// when one is set, and "@ <servers>", or that the program's own SDK
// config client (WithConfigClient) reads it. It holds no credential.
func (r *RuleSource) Describe() string { return r.where }

// describeRules is RuleSource.Describe for dataID read with c.
func (c *config) describeRules(dataID string) string {
	servers, ns := c.servers, c.namespace
	if c.client != nil { // its servers and namespace apply (WithClient)
		servers, ns = c.client.cfg.servers, c.client.cfg.namespace
	}
	var b strings.Builder
	b.WriteString("nacos config " + c.group + "/" + dataID)
	if ns != "" && ns != constant.DEFAULT_NAMESPACE_ID {
		b.WriteString(" in namespace " + ns)
	}
	if c.client == nil && c.configCl != nil {
		b.WriteString(" (through the program's SDK config client)")
		return b.String()
	}
	hosts := make([]string, len(servers))
	for i, s := range servers {
		hosts[i] = withoutUserInfo(s)
	}
	b.WriteString(" @ " + strings.Join(hosts, ","))
	return b.String()
}

// withoutUserInfo drops what precedes an "@" in a server address: user
// information has no place in a text shown to operators.
func withoutUserInfo(addr string) string {
	if i := strings.LastIndexByte(addr, '@'); i >= 0 {
		return addr[i+1:]
	}
	return addr
}

// Load reads and parses the document. A missing document gives the zero
// Rules (routing by header and metadata alone). While the SDK client is
// still connecting, Load retries until ctx is done. It returns when ctx
// ends, with an error wrapping ctx.Err() when a read was under way (the
// SDK's read honours only its own timeout: it ends on its own).
func (r *RuleSource) Load(ctx context.Context) (graylb.Rules, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	var data string
	var err error
	for {
		if data, err = r.getConfig(ctx); err == nil {
			break
		}
		if ctx.Err() != nil {
			return graylb.Rules{}, fmt.Errorf("nacos: rules %s/%s: %w", r.group, r.dataID, err)
		}
		select {
		case <-ctx.Done():
			return graylb.Rules{}, fmt.Errorf("nacos: rules %s/%s: %s", r.group, r.dataID, firstLine(err))
		case <-time.After(50 * time.Millisecond):
		}
	}
	if data == "" {
		return graylb.Rules{}, nil
	}
	rules, err := graylb.ParseRules([]byte(data))
	if err != nil {
		return graylb.Rules{}, fmt.Errorf("nacos: rules %s/%s: %w", r.group, r.dataID, err)
	}
	return rules, nil
}

// getConfig reads the document, returning ctx.Err() when ctx ends first.
func (r *RuleSource) getConfig(ctx context.Context) (string, error) {
	type result struct {
		data string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		data, err := r.client.GetConfig(vo.ConfigParam{DataId: r.dataID, Group: r.group})
		done <- result{data, err}
	}()
	select {
	case res := <-done:
		return res.data, res.err
	case <-ctx.Done():
		select {
		case res := <-done: // read as ctx ended: the answer stands
			return res.data, res.err
		default:
			return "", ctx.Err()
		}
	}
}

// Watch calls fn with each new valid document until stop is called.
func (r *RuleSource) Watch(fn func(graylb.Rules)) (func(), error) {
	if fn == nil {
		return nil, errors.New("nacos: nil watch function")
	}
	w := &ruleWatch{fn: fn}
	param := vo.ConfigParam{DataId: r.dataID, Group: r.group, OnChange: func(_, _, _, data string) {
		if data == "" {
			r.logger.Warn("nacos: rule document removed; keeping the current rules", "dataId", r.dataID, "group", r.group)
			return
		}
		rules, err := graylb.ParseRules([]byte(data))
		if err != nil {
			r.logger.Error("nacos: rule document refused; previous rules stay in force", "dataId", r.dataID, "group", r.group, "err", err)
			err = fmt.Errorf("nacos: rules %s/%s: %w", r.group, r.dataID, err)
			for _, f := range r.refusals.Snapshot() {
				f(err)
			}
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if data != w.last { // the same document came over HTTP already
			w.deliver(data, rules)
		}
	}}
	if err := r.client.ListenConfig(param); err != nil {
		return nil, fmt.Errorf("nacos: listen rules %s/%s: %w", r.group, r.dataID, err)
	}
	remove := r.watches.Add(w)
	var once sync.Once
	return func() {
		once.Do(func() {
			w.stopped.Store(true)
			remove()
			if err := r.client.CancelListenConfig(vo.ConfigParam{DataId: r.dataID, Group: r.group}); err != nil {
				r.logger.Warn("nacos: cancel rules listener failed", "err", firstLine(err))
			}
		})
	}, nil
}

// OnRefused calls fn with the error (wrapping graylb.ErrInvalidRules) of
// each document Watch refuses, until stop is called
// (see graylb.RuleSource). The SDK's listener calls it once per change
// of the document.
func (r *RuleSource) OnRefused(fn func(error)) (stop func()) {
	if fn == nil {
		return func() {}
	}
	return r.refusals.Add(fn)
}

// Close ends the catch-up over HTTP and closes the SDK client if the
// RuleSource built it.
func (r *RuleSource) Close() error {
	r.closeOnce.Do(func() {
		if r.stop != nil { // built by NewRuleSource
			close(r.stop)
			r.endLife()
			r.done.Wait()
		}
		if r.closeFn != nil {
			r.closeFn()
		}
	})
	return nil
}

var (
	_ graylb.RuleSource                          = (*RuleSource)(nil)
	_ interface{ OnRefused(func(error)) func() } = (*RuleSource)(nil) // graylb.RuleSource's OnRefused
)
