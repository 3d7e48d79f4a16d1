package httpctx_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter/adaptertest"
	"github.com/graylb/graylb/httpctx"
)

// The conformance suite over httpctx: servers are httpctx.Middleware on
// httptest servers, clients http.Clients over httpctx.NewTransport.
func TestConformance(t *testing.T) {
	adaptertest.Run(t, adaptertest.Driver{
		Name:    "httpctx",
		Options: []graylb.Option{graylb.WithContextHandler(httpctx.Handler())},
		Serve: func(t *testing.T, lb *graylb.LoadBalancer, l net.Listener, o adaptertest.ServerOptions) {
			srv := httptest.NewUnstartedServer(httpctx.Middleware(lb, middlewareOptions(o)...)(answering(o)))
			srv.Listener.Close()
			srv.Listener = l
			srv.Start()
			t.Cleanup(srv.Close)
		},
		Dial: func(t *testing.T, _ *graylb.Registry, lb *graylb.LoadBalancer, service string) adaptertest.Client {
			base := &http.Transport{}
			t.Cleanup(base.CloseIdleConnections)
			return client(&http.Client{Transport: httpctx.NewTransport(lb, httpctx.WithBase(base))}, "http://"+service+"/")
		},
		Stream: func(t *testing.T, _ *graylb.Registry, lb *graylb.LoadBalancer, service string) adaptertest.StreamClient {
			base := &http.Transport{}
			t.Cleanup(base.CloseIdleConnections)
			return adaptertest.HTTPStream(&http.Client{Transport: httpctx.NewTransport(lb, httpctx.WithBase(base))}, "http://"+service+"/")
		},
		Direct: func(t *testing.T, addr string) adaptertest.Client {
			base := &http.Transport{}
			t.Cleanup(base.CloseIdleConnections)
			return client(&http.Client{Transport: base}, "http://"+addr+"/")
		},
		MaxAllocs: 4, // maxTransportAllocs, as alloc_test.go measures without I/O
	})
}

// middlewareOptions are httpctx's options for o.
func middlewareOptions(o adaptertest.ServerOptions) []httpctx.MiddlewareOption {
	var opts []httpctx.MiddlewareOption
	if o.Trusted != nil {
		opts = append(opts, httpctx.WithTrusted(func(r *http.Request) bool { return o.Trusted(r.Header.Get) }))
	}
	if o.User != nil {
		opts = append(opts, httpctx.WithUser(func(r *http.Request) string { return o.User(r.Header.Get) }))
	}
	if len(o.Propagated) > 0 {
		opts = append(opts, httpctx.WithPropagated(o.Propagated...))
	}
	return opts
}

// answering answers each request with adaptertest.Respond, written with
// adaptertest.WriteHTTP (a fault's status for a fault, a 500 for another
// error).
func answering(o adaptertest.ServerOptions) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, err := adaptertest.Respond(r.Context(), o, r.Header)
		if f, ok := adaptertest.FaultOf(err); ok {
			http.Error(w, err.Error(), f.HTTPStatus())
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		adaptertest.WriteHTTP(w, r, o, a)
	})
}

// client calls GET url with c, the keys as headers spelled as given.
func client(c *http.Client, url string) adaptertest.Client {
	return func(ctx context.Context, keys map[string]string) (adaptertest.Answer, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return adaptertest.Answer{}, err
		}
		for k, v := range keys {
			req.Header.Add(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			return adaptertest.Answer{}, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return adaptertest.Answer{}, err
		}
		if resp.StatusCode != http.StatusOK {
			return adaptertest.Answer{}, fmt.Errorf("status %d: %s", resp.StatusCode, b)
		}
		return adaptertest.ParseAnswer(b)
	}
}
