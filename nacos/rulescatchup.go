package nacos

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/graylb/graylb"
	"github.com/nacos-group/nacos-sdk-go/v2/common/security"
)

// The RuleSource's catch-up after an outage, the rule document's side of
// the Supplier's (recover.go). The SDK's config client has a connection
// of its own, with the same reconnection back-off, and does not say
// whether it is connected; the Client's naming connection goes to the
// same servers and does. So a RuleSource built on a Client (WithClient)
// reads its document over the server's HTTP API (GET /nacos/v1/cs/configs)
// every recoverEvery while that connection is down and for
// rulesCatchUpAfter once it is back (the config connection reconnects on
// its own schedule: at most its 5 s back-off and an attempt later), and
// hands a document over when it differs from the last one handed over and
// no other was since the read began. A document that does not parse, or a
// removed one, is left to the SDK's listener, which reports it as before.
// Outside those windows it reads nothing.

// rulesCatchUpAfter is how long after the Client's connection is back the
// RuleSource keeps reading its document over HTTP.
const rulesCatchUpAfter = 10 * time.Second

// ruleWatch is one Watch: its function and what it was handed last.
type ruleWatch struct {
	fn      func(graylb.Rules)
	mu      sync.Mutex // serialises deliveries
	seq     uint64     // documents handed over
	last    string     // the last document handed over
	stopped atomic.Bool
}

// deliver hands rules (parsed from data) over, unless the watch was
// stopped (a read that began before its stop hands nothing after it);
// w.mu is held.
func (w *ruleWatch) deliver(data string, rules graylb.Rules) {
	if w.stopped.Load() {
		return
	}
	w.seq++
	w.last = data
	w.fn(rules)
}

// configOverHTTP reads a config document over the server's HTTP API, with
// the Client's namespace and credentials; found is false when the server
// has no such document. A closed Client reads nothing (errClientClosed).
func (c *Client) configOverHTTP(ctx context.Context, dataID, group string) (data string, found bool, err error) {
	if c.isClosed() {
		return "", false, errClientClosed
	}
	srv := c.builtServer()
	if srv == nil || c.lister == nil {
		return "", false, fmt.Errorf("%w: not connected to %s", ErrUnavailable, strings.Join(c.cfg.servers, ","))
	}
	tenant := c.cfg.namespace
	params := map[string]string{"dataId": dataID, "group": group, "tenant": tenant}
	srv.InjectSecurityInfo(params, security.BuildConfigResource(tenant, group, dataID))
	q := url.Values{}
	for k, v := range params {
		q.Set(k, v)
	}
	scs := c.params.ServerConfigs
	for i := range c.lister.servers(len(scs)) {
		sc := scs[i]
		u := serverURL(sc) + "/v1/cs/configs?" + q.Encode()
		var status int
		var body []byte
		status, body, err = c.lister.read(ctx, u)
		switch {
		case err != nil:
		case status == http.StatusOK:
			c.lister.answered(i)
			return string(body), true, nil
		case status == http.StatusNotFound:
			c.lister.answered(i)
			return "", false, nil
		default:
			err = fmt.Errorf("status %d", status)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return "", false, fmt.Errorf("%w: config %s/%s over HTTP: %w", ErrUnavailable, group, dataID, redact(err, c.cfg))
}

// configReader is what the catch-up needs of a Client.
type configReader interface {
	Healthy() bool
	configOverHTTP(ctx context.Context, dataID, group string) (data string, found bool, err error)
}

// catchUpLoop reads the document over HTTP every period while c is
// disconnected and for after once it is back, until Close or closed.
func (r *RuleSource) catchUpLoop(c configReader, closed <-chan struct{}, every, after time.Duration) {
	defer r.done.Done()
	tick := time.NewTicker(every)
	defer tick.Stop()
	var lastDown time.Time
	for {
		select {
		case <-r.stop:
			return
		case <-closed:
			return
		case <-tick.C:
		}
		if !c.Healthy() {
			lastDown = time.Now()
		}
		if lastDown.IsZero() || time.Since(lastDown) > after {
			continue
		}
		r.catchUpOnce(c)
	}
}

// catchUpOnce reads the document once and hands it to every watch that
// was handed nothing since the read began and holds another document.
func (r *RuleSource) catchUpOnce(c configReader) {
	watches := r.watches.Snapshot()
	if len(watches) == 0 {
		return
	}
	seqs := make([]uint64, len(watches))
	for i, w := range watches {
		w.mu.Lock()
		seqs[i] = w.seq
		w.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(r.life, recoverTimeout)
	data, found, err := c.configOverHTTP(ctx, r.dataID, r.group)
	cancel()
	if err != nil || !found || data == "" {
		return // unreachable, or removed: the SDK's listener says so once connected
	}
	var rules graylb.Rules
	parsed := false
	for i, w := range watches {
		w.mu.Lock()
		if w.seq == seqs[i] && w.last != data && !w.stopped.Load() {
			if !parsed {
				if rules, err = graylb.ParseRules([]byte(data)); err != nil {
					w.mu.Unlock()
					return // the SDK's listener refuses and reports it once connected
				}
				parsed = true
			}
			r.logger.Info("nacos: read the rule document over HTTP while the connection was down; it differed from the last one", "dataId", r.dataID, "group", r.group)
			w.deliver(data, rules)
		}
		w.mu.Unlock()
	}
}
