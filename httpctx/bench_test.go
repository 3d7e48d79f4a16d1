package httpctx

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter/adaptertest"
)

// BenchmarkTransportOverhead calls the same loopback server through the
// graylb Transport and through a plain http.Transport, interleaved, and
// reports graylb's time as a ratio of plain's and the allocations per
// request graylb adds.
func BenchmarkTransportOverhead(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	reg := graylb.NewRegistry()
	register(b, reg, "svc", srv, nil)
	lb, err := graylb.New(reg, graylb.WithContextHandler(Handler()))
	if err != nil {
		b.Fatal(err)
	}
	defer lb.Close()
	plain := &http.Transport{}
	gray := NewTransport(lb, WithBase(&http.Transport{}))
	defer plain.CloseIdleConnections()

	do := func(rt http.RoundTripper, url string) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("gray", "true")
		resp, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	plainDo := func() { do(plain, srv.URL+"/") }
	grayDo := func() { do(gray, "http://svc/") }
	for i := 0; i < 50; i++ { // warm both connection pools
		plainDo()
		grayDo()
	}
	adaptertest.Interleave(b, plainDo, grayDo, "extra-allocs/req")
}
