package nacos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/common/security"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/util"
)

// A registration reads itself back. Nacos keeps an operator's edit of an
// instance's metadata (the console, the HTTP API's instance update) beside
// what the instance registers, and serves the edit, across the instance's
// restarts: a prod build marked gray-tag=true in the console (seed 002)
// registered gray-tag=false again and was still served as gray. So after
// registering, and after each reconnection (the SDK registers again), the
// Client reads the instance from the server and writes what it registered
// over the HTTP API when the metadata served differs.

// ownRegistration is an instance registered through the Client.
type ownRegistration struct {
	service, group string
	in             model.Instance
}

// verifyWithin bounds a read-back: the instance listed, rewritten if need
// be and read again.
const verifyWithin = 10 * time.Second

// verify reads in back from the server, within ctx, and writes its
// metadata again when the server serves other values for the keys it
// registered. It returns an error naming the instance when the server
// keeps other metadata or does not list it.
func (c *Client) verify(ctx context.Context, r ownRegistration) error {
	addr := r.in.Ip + ":" + strconv.FormatUint(r.in.Port, 10)
	served, err := c.readBack(ctx, r, false)
	if err != nil {
		return err
	}
	if differs(r.in.Metadata, served) == "" {
		return nil
	}
	c.cfg.logger.Warn("nacos: the server serves other metadata than this instance registered (an edit in the console?): writing it again",
		"service", r.service, "instance", addr, "differs", differs(r.in.Metadata, served))
	if err := c.updateOverHTTP(ctx, r); err != nil {
		return fmt.Errorf("nacos: %s %s: the server serves %s; writing the registered metadata failed: %w", r.service, addr, differs(r.in.Metadata, served), err)
	}
	served, err = c.readBack(ctx, r, true)
	if err != nil {
		return err
	}
	if d := differs(r.in.Metadata, served); d != "" {
		return fmt.Errorf("nacos: %s %s: the server keeps serving %s after it was written again", r.service, addr, d)
	}
	return nil
}

// readBack polls the server until it lists r's instance (and, when
// matching, until its metadata is what r registered) or ctx ends, and
// returns the instance's metadata as served.
func (c *Client) readBack(ctx context.Context, r ownRegistration, matching bool) (map[string]string, error) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last map[string]string
	listed := false
	for {
		hosts, err := c.query(ctx, r.service, r.group, nil)
		if err == nil {
			for _, h := range hosts {
				if h.Ip == r.in.Ip && h.Port == r.in.Port && (r.in.ClusterName == "" || h.ClusterName == r.in.ClusterName) {
					listed, last = true, h.Metadata
					if !matching || differs(r.in.Metadata, h.Metadata) == "" {
						return h.Metadata, nil
					}
				}
			}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			if listed {
				return last, nil
			}
			return nil, fmt.Errorf("nacos: %s %s:%d: not listed by the server: %w", r.service, r.in.Ip, r.in.Port, ctx.Err())
		}
	}
}

// differs describes the registered metadata the server serves otherwise,
// "" when it serves each registered value.
func differs(registered, served map[string]string) string {
	var d []string
	for k, v := range registered {
		if s, ok := served[k]; !ok || s != v {
			d = append(d, fmt.Sprintf("%s=%q (registered %q)", k, s, v))
		}
	}
	return strings.Join(d, ", ")
}

// updateOverHTTP writes r's instance (weight, enabled, metadata) with the
// HTTP API's instance update, the call the console makes, with the
// Client's namespace and credentials.
func (c *Client) updateOverHTTP(ctx context.Context, r ownRegistration) error {
	srv := c.builtServer()
	if srv == nil || c.lister == nil {
		return fmt.Errorf("%w: not connected to %s", ErrUnavailable, strings.Join(c.cfg.servers, ","))
	}
	md, err := json.Marshal(r.in.Metadata)
	if err != nil {
		return err
	}
	ns := c.params.ClientConfig.NamespaceId
	if ns == "" {
		ns = "public"
	}
	params := map[string]string{
		"serviceName": util.GetGroupName(r.service, r.group), "groupName": r.group, "namespaceId": ns,
		"ip": r.in.Ip, "port": strconv.FormatUint(r.in.Port, 10), "clusterName": r.in.ClusterName,
		"weight": strconv.FormatFloat(r.in.Weight, 'f', -1, 64), "enabled": strconv.FormatBool(r.in.Enable),
		"ephemeral": "true", "metadata": string(md),
	}
	if params["clusterName"] == "" {
		params["clusterName"] = "DEFAULT"
	}
	srv.InjectSecurityInfo(params, security.BuildNamingResource(ns, r.service, r.group))
	q := url.Values{}
	for k, v := range params {
		q.Set(k, v)
	}
	for i := range c.lister.servers(len(c.params.ServerConfigs)) {
		u := serverURL(c.params.ServerConfigs[i]) + "/v1/ns/instance?" + q.Encode()
		req, rerr := http.NewRequestWithContext(ctx, http.MethodPut, u, nil)
		if rerr != nil {
			return errors.New("bad request URL")
		}
		resp, derr := c.lister.hc.Do(req)
		if derr != nil {
			var ue *url.Error
			if errors.As(derr, &ue) {
				derr = ue.Err // its URL holds the access token
			}
			err = derr
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return nil
		}
		err = fmt.Errorf("status %d", resp.StatusCode)
	}
	return redact(err, c.cfg)
}

// verifyAfter reads r back within verifyWithin, in the background, and
// logs what it could not set right.
func (c *Client) verifyAfter(r ownRegistration) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.done.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.done.Done()
		ctx, cancel := context.WithTimeout(c.ctx, verifyWithin)
		defer cancel()
		if err := c.verify(ctx, r); err != nil && c.ctx.Err() == nil {
			c.cfg.logger.Error("nacos: the registered instance's metadata could not be set right", "err", err)
		}
	}()
}

// reverify reads every instance registered through the Client back: the
// SDK registered them again after a reconnection.
func (c *Client) reverify() {
	c.mu.Lock()
	own := make([]ownRegistration, 0, len(c.own))
	for _, r := range c.own {
		own = append(own, r)
	}
	c.mu.Unlock()
	for _, r := range own {
		c.verifyAfter(r)
	}
}
