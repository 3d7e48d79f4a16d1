package nacos

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/graylb/graylb"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client/naming_grpc"
	"github.com/nacos-group/nacos-sdk-go/v2/common/nacos_server"
)

// watchConnection polls the connection's state and, with several servers,
// whether each answers, and records every change as the start of a refill.
func (c *Client) watchConnection() {
	defer c.done.Done()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	ever, down := false, false
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
			if down {
				down = false
				c.reverify() // the SDK registers its instances again
			}
		} else if ever {
			down = true
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

// builtServer returns the SDK's server list and login once built with
// its naming client, nil until then or when the build failed.
func (c *Client) builtServer() *nacos_server.NacosServer {
	select {
	case <-c.built:
		if c.naming == nil {
			return nil
		}
		return c.server
	default:
		return nil
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
