package faulttest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
	"github.com/graylb/graylb"
	"github.com/graylb/graylb/httpctx"
	"github.com/graylb/graylb/nacos"
	"github.com/stretchr/testify/require"
)

// backOffOutage is how long TestFault_NacosAfterBackOff keeps the link
// down before it waits for the SDK's next connection attempt: the SDK
// sleeps 100 ms longer after each failed attempt (up to 5 s), so after
// 40 s it tries again only about every 2.8 s, and after the long plan's
// 60 s every 3.4 s.
func backOffOutage() time.Duration {
	if long() {
		return 60 * time.Second
	}
	return 40 * time.Second
}

// TestFault_NacosAfterBackOff takes the client ↔ Nacos link down for long
// enough that the Nacos SDK's reconnect back-off has grown past the 2 s
// target, registers a new prod instance and makes a user gray in the
// rules while it is down, and ends the outage right after one of the
// SDK's connection attempts (a listener of the test's own takes the gRPC
// port while the proxy is off, accepts each attempt and closes it): the
// SDK's next attempt is then a whole back-off away. The new instance must
// be routed to, and the user's requests go gray, within 2 s after the
// link is back, with no failed request and none of the wrong kind
// meanwhile.
//
// TestFault_Nacos's "down" fault ends at a moment unrelated to the SDK's
// attempts, so its recovery time varies between 0 and the back-off; this
// one measures the worst phase.
func TestFault_NacosAfterBackOff(t *testing.T) {
	cl := toxiClient(t)
	addr := nacosAddr(t)
	t.Parallel()
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	httpPort, err := strconv.Atoi(port)
	require.NoError(t, err)
	p := freePortPair(t)
	grpcListen := fmt.Sprintf("127.0.0.1:%d", p+1000)
	link := []*toxiproxy.Proxy{
		newProxy(t, cl, "nacos-backoff-http", fmt.Sprintf("127.0.0.1:%d", p), addr),
		newProxy(t, cl, "nacos-backoff-grpc", grpcListen, net.JoinHostPort(host, strconv.Itoa(httpPort+1000))),
	}

	svc := fmt.Sprintf("fault-backoff-%d", time.Now().UnixNano()%1e9)
	dataID := svc + "-rules"
	publishConfig(t, addr, dataID, `{}`)
	for _, b := range []*backend{startBackend(t, "prod-1", false), startBackend(t, "gray-1", true)} {
		registerBackend(t, nacosClient(t, addr), svc, b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := nacos.NewClient(ctx, nacosOpts(t, fmt.Sprintf("127.0.0.1:%d", p))...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	sup, err := nacos.NewSupplier(nacos.WithClient(c))
	require.NoError(t, err)
	t.Cleanup(func() { sup.Close() })
	src, err := nacos.NewRuleSource(dataID, nacos.WithClient(c))
	require.NoError(t, err)
	t.Cleanup(func() { src.Close() })
	lb, err := graylb.New(sup, graylb.WithRuleSource(src))
	require.NoError(t, err)
	t.Cleanup(func() { lb.Close() })
	tr := httpctx.NewTransport(lb)
	t.Cleanup(tr.CloseIdleConnections)
	send := httpSender(&http.Client{Transport: tr}, svc)
	waitAnswered(t, send, "prod-1", "gray-1")

	nb := startBackend(t, "new", false)
	nc := nacosClient(t, addr)
	user := fmt.Sprintf("u-backoff-%d", time.Now().UnixNano()%1e6)
	l := startLoad(t, send, user)
	l.steady(t) // the load's steady state before the fault

	var once sync.Once
	enable := func() {
		once.Do(func() {
			for _, px := range link {
				require.NoError(t, px.Enable(), "enabling proxy %s", px.Name)
			}
		})
	}
	for _, px := range link {
		require.NoError(t, px.Disable(), "disabling proxy %s", px.Name)
	}
	t.Cleanup(enable)
	changed := time.Now()
	registerBackend(t, nc, svc, nb)
	publishConfig(t, addr, dataID, fmt.Sprintf(`{"grayUsers":[%q]}`, user))
	time.Sleep(time.Until(changed.Add(backOffOutage()))) // must sleep: the outage's length is a fixed part of the plan

	// Take the gRPC port (free while the proxy is off) and wait for the
	// SDK's next attempt; the back-off is at most 5 s.
	ln, err := net.Listen("tcp", grpcListen)
	require.NoError(t, err, "taking the gRPC proxy's port while it is off")
	attempt := make(chan struct{}, 1)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Close() // refused, as by a server that is down
			select {
			case attempt <- struct{}{}:
			default:
			}
		}
	}()
	select {
	case <-attempt:
	case <-time.After(15 * time.Second):
		ln.Close()
		t.Fatal("the SDK made no connection attempt within 15 s")
	}
	ln.Close()
	enable()
	ended := time.Now()

	firsts := l.waitUntil(ended.Add(recoveryWait()),
		func(r record) bool { return r.err == nil && r.from(nb.name) },
		func(r record) bool { return r.err == nil && r.stream == streamProbe && r.gray() })
	l.steady(t) // the load's steady state after recovery
	recs := l.finish(t)

	res := result{pair: "client ↔ Nacos", fault: "link down, ended right after an SDK attempt", lasted: ended.Sub(changed),
		list: durationOf(firsts[0], changed), rules: durationOf(firsts[1], changed)}
	var missing []string
	for i, what := range []string{"the new instance " + nb.name, "the gray user's requests on gray"} {
		if firsts[i].done.IsZero() {
			missing = append(missing, what)
			continue
		}
		res.recovery = max(res.recovery, firsts[i].done.Sub(ended))
	}
	if len(missing) > 0 {
		res.recovery, res.recoveryMissing = never, strings.Join(missing, ", ")
	}
	ruleAt := firsts[1].done
	for _, r := range recs {
		res.sent++
		switch {
		case r.err != nil:
			if res.failed++; res.firstErr == "" {
				res.firstErr = r.err.Error()
			}
		case r.stream == streamGray && !r.gray(), r.stream == streamProd && r.gray():
			res.wrong++
		case r.stream == streamProbe && !ruleAt.IsZero() && r.start.After(ruleAt) && !r.gray():
			res.wrong++ // the rules had applied: the gray user's request went prod
		default:
			res.slowest = max(res.slowest, r.done.Sub(r.start))
		}
	}
	t.Logf("\n%s%s", tableHead, res.row())
	reliabilityFragment(t, "fault-nacos-backoff", res.row())
	res.check(t)
}
