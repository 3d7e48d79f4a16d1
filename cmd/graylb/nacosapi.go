package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/graylb/graylb"
)

// nacosAPI speaks Nacos' HTTP open API (v1): config read and publish,
// instance lists, login. The command uses it rather than nacos-sdk-go's
// clients because
//   - the SDK's GetConfig answers from its disk snapshot when the server
//     fails, and a compare-and-set must start from the server's content;
//   - the nacos module's Supplier hands over healthy, enabled instances
//     only, while status shows every instance;
//   - a one-shot command needs no long-lived gRPC connection, disk cache
//     or log folder.
//
// The SDK's PublishConfig (v2.3.0) would send vo.ConfigParam.CasMd5 the
// same way; the HTTP form field casMd5 is the open API's equivalent.
type nacosAPI struct {
	servers   []string // base URLs: scheme://host:port
	namespace string
	username  string
	password  string
	client    *http.Client

	mu    sync.Mutex
	token string
}

// maxBody bounds what is read of an answer: a rule document may be
// graylb.MaxRulesSize bytes; instance lists are much smaller.
const maxBody = graylb.MaxRulesSize + 1<<20

func newNacosAPI(servers, namespace, username, password string, client *http.Client) (*nacosAPI, error) {
	a := &nacosAPI{namespace: namespace, username: username, password: password, client: client}
	for _, s := range strings.Split(servers, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !strings.Contains(s, "://") {
			s = "http://" + s
		}
		u, err := url.Parse(s)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("nacos server %q: not host:port or an http(s) URL", redactURL(s))
		}
		if u.User != nil {
			return nil, fmt.Errorf("nacos server %q: put credentials in GRAYLB_NACOS_USERNAME and GRAYLB_NACOS_PASSWORD, not in the address", redactURL(s))
		}
		if u.Port() == "" {
			u.Host += ":8848"
		}
		u.Path = strings.TrimSuffix(u.Path, "/")
		if u.Path == "" {
			u.Path = "/nacos"
		}
		a.servers = append(a.servers, u.String())
	}
	if len(a.servers) == 0 {
		return nil, errors.New("no nacos server given (--nacos or GRAYLB_NACOS)")
	}
	return a, nil
}

// redactURL drops user information from an address shown in an error.
func redactURL(s string) string {
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		if j := strings.Index(s, "://"); j >= 0 && j < i {
			return s[:j+3] + s[i+1:]
		}
		return s[i+1:]
	}
	return s
}

func (a *nacosAPI) describe() string {
	hosts := make([]string, len(a.servers))
	for i, s := range a.servers {
		hosts[i] = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(s, "http://"), "https://"), "/nacos")
	}
	return strings.Join(hosts, ",")
}

// statusError is an answer of the server other than 200.
type statusError struct {
	code int
	body string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("nacos answered %d: %s", e.code, firstLine(e.body, 200))
}

// do sends one request to the first server that answers; a server that
// cannot be reached is skipped, an answer (any status) is final.
func (a *nacosAPI) do(ctx context.Context, method, path string, params url.Values) ([]byte, error) {
	var errs []error
	for _, base := range a.servers {
		body, err := a.doOn(ctx, base, method, path, params)
		if err == nil {
			return body, nil
		}
		var se *statusError
		if errors.As(err, &se) || ctx.Err() != nil {
			return nil, err
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("no nacos server answered: %w", errors.Join(errs...))
}

// doOn sends one request to base. Logged in, a refusal (401, 403) of the
// token it carried is answered by a new login and the request sent again,
// once: the token may have expired (Nacos' tokenTtl, 5 hours by default,
// which a long rollout outlives).
func (a *nacosAPI) doOn(ctx context.Context, base, method, path string, params url.Values) ([]byte, error) {
	body, tok, err := a.doOnce(ctx, base, method, path, params)
	var se *statusError
	if tok != "" && errors.As(err, &se) && (se.code == http.StatusForbidden || se.code == http.StatusUnauthorized) {
		a.forget(tok)
		body, _, err = a.doOnce(ctx, base, method, path, params)
	}
	return body, err
}

// forget drops tok, so that the next request logs in again.
func (a *nacosAPI) forget(tok string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.token == tok {
		a.token = ""
	}
}

// doOnce sends one request to base, with the access token it returns when
// logged in.
func (a *nacosAPI) doOnce(ctx context.Context, base, method, path string, params url.Values) (_ []byte, tok string, _ error) {
	if a.username != "" {
		var err error
		if tok, err = a.login(ctx, base); err != nil {
			return nil, "", err
		}
		params = cloneValues(params)
		params.Set("accessToken", tok)
	}
	var req *http.Request
	var err error
	if method == http.MethodGet || method == http.MethodDelete {
		req, err = http.NewRequestWithContext(ctx, method, base+path+"?"+params.Encode(), nil)
	} else {
		req, err = http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(params.Encode()))
		if req != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	}
	if err != nil {
		return nil, tok, err
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, tok, fmt.Errorf("%s %s: %w", method, path, cause(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return nil, tok, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if len(body) > maxBody {
		return nil, tok, fmt.Errorf("%s %s: answer larger than %d bytes", method, path, maxBody)
	}
	if resp.StatusCode != http.StatusOK {
		return body, tok, &statusError{code: resp.StatusCode, body: string(body)}
	}
	return body, tok, nil
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// login returns an access token for base, logging in once per command.
func (a *nacosAPI) login(ctx context.Context, base string) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.token != "" {
		return a.token, nil
	}
	form := url.Values{"username": {a.username}, "password": {a.password}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/auth/login", strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := a.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("nacos login: %w", cause(err))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("nacos login as %q: answered %d", a.username, resp.StatusCode)
	}
	var ans struct {
		AccessToken string `json:"accessToken"`
	}
	if err := json.Unmarshal(body, &ans); err != nil || ans.AccessToken == "" {
		return "", fmt.Errorf("nacos login as %q: no access token in the answer", a.username)
	}
	a.token = ans.AccessToken
	return a.token, nil
}

// getConfig reads a config; exists is false when there is none.
func (a *nacosAPI) getConfig(ctx context.Context, dataID, group string) (data []byte, exists bool, err error) {
	p := url.Values{"dataId": {dataID}, "group": {group}}
	if a.namespace != "" {
		p.Set("tenant", a.namespace)
	}
	body, err := a.do(ctx, http.MethodGet, "/v1/cs/configs", p)
	var se *statusError
	if errors.As(err, &se) && se.code == http.StatusNotFound {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading config %s/%s: %w", group, dataID, err)
	}
	return body, true, nil
}

// publishConfig writes a config; casMd5, when not empty, is the md5 the
// server must still hold (official Nacos refuses the write otherwise).
func (a *nacosAPI) publishConfig(ctx context.Context, dataID, group string, data []byte, casMd5 string) error {
	p := url.Values{"dataId": {dataID}, "group": {group}, "content": {string(data)}, "type": {"json"}}
	if a.namespace != "" {
		p.Set("tenant", a.namespace)
	}
	if casMd5 != "" {
		p.Set("casMd5", casMd5)
	}
	body, err := a.do(ctx, http.MethodPost, "/v1/cs/configs", p)
	if err != nil {
		var se *statusError
		if errors.As(err, &se) && casMd5 != "" && se.code != http.StatusForbidden && se.code != http.StatusUnauthorized {
			// Official Nacos answers a failed compare-and-set with an error
			// status (500, or 409 in newer versions).
			return fmt.Errorf("%w (nacos refused the write: %s)", errConflict, firstLine(se.body, 200))
		}
		return fmt.Errorf("writing config %s/%s: %w", group, dataID, err)
	}
	if strings.TrimSpace(string(body)) != "true" {
		if casMd5 != "" {
			return fmt.Errorf("%w (nacos answered %q)", errConflict, firstLine(string(body), 100))
		}
		return fmt.Errorf("writing config %s/%s: nacos answered %q", group, dataID, firstLine(string(body), 100))
	}
	return nil
}

// deleteConfig removes a config (none there is no error).
func (a *nacosAPI) deleteConfig(ctx context.Context, dataID, group string) error {
	p := url.Values{"dataId": {dataID}, "group": {group}}
	if a.namespace != "" {
		p.Set("tenant", a.namespace)
	}
	if _, err := a.do(ctx, http.MethodDelete, "/v1/cs/configs", p); err != nil {
		return fmt.Errorf("deleting config %s/%s: %w", group, dataID, err)
	}
	return nil
}

// nacosInstance is one entry of the open API's instance list.
type nacosInstance struct {
	IP          string            `json:"ip"`
	Port        int               `json:"port"`
	Weight      float64           `json:"weight"`
	Healthy     bool              `json:"healthy"`
	Enabled     bool              `json:"enabled"`
	ClusterName string            `json:"clusterName"`
	Metadata    map[string]string `json:"metadata"`
}

// instances lists every instance of a service, healthy or not.
func (a *nacosAPI) instances(ctx context.Context, service, group string) ([]graylb.Instance, error) {
	p := url.Values{"serviceName": {service}, "groupName": {group}, "healthyOnly": {"false"}}
	if a.namespace != "" {
		p.Set("namespaceId", a.namespace)
	}
	body, err := a.do(ctx, http.MethodGet, "/v1/ns/instance/list", p)
	if err != nil {
		return nil, fmt.Errorf("listing instances of %s: %w", service, err)
	}
	var ans struct {
		Hosts []nacosInstance `json:"hosts"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return nil, fmt.Errorf("listing instances of %s: the answer is not an instance list: %v", service, err)
	}
	out := make([]graylb.Instance, 0, len(ans.Hosts))
	for _, h := range ans.Hosts {
		out = append(out, graylb.Instance{Service: service, Host: h.IP, Port: h.Port, Weight: h.Weight,
			Healthy: h.Healthy, Enabled: h.Enabled, Cluster: h.ClusterName, Metadata: h.Metadata})
	}
	return out, nil
}

// maxServices bounds the services status lists without names.
const maxServices = 1000

// services lists the names of the services registered in group, at most
// maxServices of them; total is how many there are.
func (a *nacosAPI) services(ctx context.Context, group string) (names []string, total int, err error) {
	p := url.Values{"pageNo": {"1"}, "pageSize": {strconv.Itoa(maxServices)}, "groupName": {group}}
	if a.namespace != "" {
		p.Set("namespaceId", a.namespace)
	}
	body, err := a.do(ctx, http.MethodGet, "/v1/ns/service/list", p)
	if err != nil {
		return nil, 0, fmt.Errorf("listing services: %w", err)
	}
	var ans struct {
		Count int      `json:"count"`
		Doms  []string `json:"doms"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return nil, 0, fmt.Errorf("listing services: the answer is not a service list: %v", err)
	}
	if len(ans.Doms) > maxServices {
		ans.Doms = ans.Doms[:maxServices]
	}
	return ans.Doms, max(ans.Count, len(ans.Doms)), nil
}

// firstLine returns s's first line, at most n bytes.
func firstLine(s string, n int) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	if len(s) > n {
		s = s[:n] + "…"
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// cause is the error under an *url.Error, whose text would show the URL
// (and an access token in its query).
func cause(err error) error {
	if u := errors.Unwrap(err); u != nil {
		return u
	}
	return err
}
