package nacos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/common/security"
	sdktls "github.com/nacos-group/nacos-sdk-go/v2/common/tls"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/util"
)

// The HTTP side of a Client: a read of one service's instance list over
// the server's HTTP open API (GET /nacos/v1/ns/instance/list), used only
// while the gRPC connection is down (see Supplier). The SDK reconnects on
// its own schedule, sleeping 100 ms longer after each failed attempt up
// to 5 s, and offers no way to wake it: after a long outage it learns
// what changed meanwhile only seconds after the server is back. One HTTP
// request reaches the server as soon as it answers.

// maxListBytes bounds the answer read: a list of tens of thousands of
// instances fits.
const maxListBytes = 64 << 20

// httpLister holds what a Client needs to read lists over HTTP.
type httpLister struct {
	hc *http.Client
	// good is the index of the server that answered last: reads start
	// there and move on only when it fails, so that two servers that
	// disagree for a while (one restarted, its lists still filling) do not
	// make the lists flip between their views from one read to the next.
	good atomic.Uint32
}

// servers returns the order to try n servers in: the one that answered
// last first, then the others in turn.
func (l *httpLister) servers(n int) func(yield func(int) bool) {
	first := int(l.good.Load()) % n
	return func(yield func(int) bool) {
		for i := range n {
			if !yield((first + i) % n) {
				return
			}
		}
	}
}

// answered records that server i answered.
func (l *httpLister) answered(i int) { l.good.Store(uint32(i)) }

// newHTTPLister builds the HTTP client of a Client: no keep-alive (it
// serves only while the gRPC connection is down, a request every few
// hundred milliseconds, and leaves no idle connection or goroutine behind
// after Close), TLS as the SDK's settings say, and no redirect followed:
// the request's query holds the access token, which a redirect would hand
// its target (in the Referer header), another host maybe. A redirect is
// a failed read (its status).
func newHTTPLister(cfg *config) (*httpLister, error) {
	tr := &http.Transport{DisableKeepAlives: true, Proxy: nil, DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext}
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	l := &httpLister{hc: &http.Client{Transport: tr, CheckRedirect: noRedirect}}
	if cfg.tls != nil {
		tc, err := sdktls.NewTLS(*cfg.tls)
		if err != nil {
			return nil, fmt.Errorf("%w: TLS: %v", ErrConfig, err)
		}
		tr.TLSClientConfig = tc // for a server whose scheme is https
	}
	return l, nil
}

// serverURL is the base of sc's open API: its scheme (http unless its
// ServerConfig says otherwise), address and context path. The scheme is
// the SDK's for its own HTTP requests (its login): WithTLS secures the gRPC
// connection, and the SDK still logs in over the server's scheme, so an
// HTTP read over another one would fail where the login works.
func serverURL(sc constant.ServerConfig) string {
	scheme := sc.Scheme
	if scheme == "" {
		scheme = "http"
	}
	return scheme + "://" + net.JoinHostPort(sc.IpAddr, strconv.FormatUint(sc.Port, 10)) + sc.ContextPath
}

// listOverHTTP reads a service's instances from the server over its HTTP
// open API, with the Client's namespace and credentials (the access token
// the SDK's login holds, or the access key's signature). It tries the
// server that answered last, then the others in turn until one answers,
// within ctx. A closed Client
// reads nothing (errClientClosed).
func (c *Client) listOverHTTP(ctx context.Context, service, group string, clusters []string) ([]model.Instance, error) {
	if c.isClosed() {
		return nil, errClientClosed
	}
	srv := c.builtServer()
	if srv == nil || c.lister == nil {
		return nil, fmt.Errorf("%w: not connected to %s", ErrUnavailable, strings.Join(c.cfg.servers, ","))
	}
	ns := c.params.ClientConfig.NamespaceId
	if ns == "" {
		ns = "public"
	}
	grouped := util.GetGroupName(service, group)
	params := map[string]string{
		"serviceName": grouped, "groupName": group, "namespaceId": ns,
		"clusters": strings.Join(clusters, ","), "healthyOnly": "false",
	}
	srv.InjectSecurityInfo(params, security.BuildNamingResource(ns, service, group))
	q := url.Values{}
	for k, v := range params {
		q.Set(k, v)
	}
	scs := c.params.ServerConfigs
	var err error
	for i := range c.lister.servers(len(scs)) {
		sc := scs[i]
		u := serverURL(sc) + "/v1/ns/instance/list?" + q.Encode()
		var svc *model.Service
		if svc, err = c.lister.get(ctx, u, service, grouped); err == nil {
			c.lister.answered(i)
			return svc.Hosts, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("%w: %s over HTTP: %w", ErrUnavailable, service, redact(err, c.cfg))
}

// get reads one list; the answer must name the service (grouped, or
// alone).
func (l *httpLister) get(ctx context.Context, u, service, grouped string) (*model.Service, error) {
	status, body, err := l.read(ctx, u)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("status %d", status)
	}
	var svc model.Service
	if err := json.Unmarshal(body, &svc); err != nil {
		return nil, fmt.Errorf("answer: %w", err)
	}
	if svc.Name != grouped && svc.Name != service {
		return nil, fmt.Errorf("answer names service %q, want %q", svc.Name, grouped)
	}
	return &svc, nil
}

// read GETs u and returns the status and at most maxListBytes of the
// body; its errors never quote u (it holds the access token).
func (l *httpLister) read(ctx context.Context, u string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, nil, errors.New("bad request URL")
	}
	resp, err := l.hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			return 0, nil, ue.Err
		}
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxListBytes+1))
	if err != nil {
		return 0, nil, err
	}
	if len(body) > maxListBytes {
		return 0, nil, fmt.Errorf("answer longer than %d bytes", maxListBytes)
	}
	return resp.StatusCode, body, nil
}

// isClosed reports whether Close was called.
func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}
