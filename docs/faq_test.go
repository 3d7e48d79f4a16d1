package docs

import (
	"bytes"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/httpctx"
)

// docs/faq.md: work that outlives the request keeps the kind decided for
// it, a rule's decision included (a gray user here: the request carries no
// gray header to copy).
func TestFAQDetach(t *testing.T) {
	reg := graylb.NewRegistry()
	httpService(t, reg, "audit-service")
	lb, err := graylb.New(reg, graylb.WithRules(graylb.Rules{GrayUsers: []string{"alice"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	// The client's calls wait until the handler has returned, and tell the
	// test who answered.
	handlerDone, answered := make(chan struct{}), make(chan string, 1)
	transport := httpctx.NewTransport(lb)
	client := &http.Client{Transport: roundTripFunc(func(req *http.Request) (*http.Response, error) {
		<-handlerDone
		resp, err := transport.RoundTrip(req)
		if err != nil {
			answered <- err.Error()
			return nil, err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		answered <- string(b)
		resp.Body = io.NopCloser(bytes.NewReader(b))
		return resp, nil
	})}

	// snippet: faq-detach
	handler := func(w http.ResponseWriter, r *http.Request) {
		ctx := lb.Detach(r.Context()) // not cancelled with r; the kind decided for r, fixed
		go func() {
			req, _ := http.NewRequestWithContext(ctx, "POST", "http://audit-service/events", nil)
			resp, err := client.Do(req) // after the handler returned: r's kind, rules included
			if err != nil {
				log.Print(err)
				return
			}
			resp.Body.Close()
		}()
	}
	// end snippet

	srv := httptest.NewServer(httpctx.Middleware(lb)(http.HandlerFunc(handler)))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("uid", "alice")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	close(handlerDone)
	if got := <-answered; !strings.HasPrefix(got, "audit-service-gray gray=true") {
		t.Errorf("the detached call of a gray user's request was answered %q", got)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
