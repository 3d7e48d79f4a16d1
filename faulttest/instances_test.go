package faulttest

import (
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
	"github.com/graylb/graylb"
	"github.com/graylb/graylb/httpctx"
	"github.com/stretchr/testify/require"
)

// TestFault_Instances puts each fault on the link between the client (the
// httpctx Transport) and one prod and one gray instance of the two of each
// kind: every instance is registered at its proxy's address, so the
// faulted two are reached only through the fault. The other two keep a
// working instance of each kind.
func TestFault_Instances(t *testing.T) {
	cl := toxiClient(t)
	t.Parallel()
	const svc = "fault-instances"
	reg := graylb.NewRegistry()
	var link []*toxiproxy.Proxy
	for _, b := range []*backend{
		startBackend(t, "prod-1", false), startBackend(t, "gray-1", true),
		startBackend(t, "prod-2", false), startBackend(t, "gray-2", true),
	} {
		p := newProxy(t, cl, "instances-"+b.name, "", b.addr)
		if b.name == "prod-1" || b.name == "gray-1" {
			link = append(link, p)
		}
		host, port, err := net.SplitHostPort(p.Listen)
		require.NoError(t, err)
		n, err := strconv.Atoi(port)
		require.NoError(t, err)
		require.NoError(t, reg.Register(graylb.NewInstance(svc, host, n, b.metadata())))
	}
	lb, err := graylb.New(reg)
	require.NoError(t, err)
	t.Cleanup(func() { lb.Close() })
	// A try that gets no answer within a second is sent again to another
	// instance of its kind (the request's deadline is 3 s).
	tr := httpctx.NewTransport(lb, httpctx.WithTryTimeout(time.Second))
	t.Cleanup(tr.CloseIdleConnections)
	p := pair{
		name:    "client ↔ instances",
		link:    link,
		send:    httpSender(&http.Client{Transport: tr}, svc),
		faulted: []string{"prod-1", "gray-1"},
	}
	runPlan(t, p, "fault-instances", nil)
}
