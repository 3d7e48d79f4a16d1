package docs

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/httpctx"
	"github.com/graylb/graylb/policy"
)

// docs/traffic.md: outlier detection and P2C over HTTP. One of three prod
// instances answers 500: a few requests reach it before it is ejected or
// avoided, then none.
func TestOutlierDetectionAndP2C(t *testing.T) {
	reg := graylb.NewRegistry()
	registerHTTP(t, reg, "user-service", echo(t, "ok-1"), nil)
	registerHTTP(t, reg, "user-service", echo(t, "ok-2"), nil)
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "broken", http.StatusInternalServerError)
	}))
	defer broken.Close()
	registerHTTP(t, reg, "user-service", broken, nil)

	// snippet: outlier-p2c
	lb, err := graylb.New(reg,
		graylb.WithOutlierDetection(graylb.OutlierConfig{}), // in a row (5), by rate (10 s window), per kind of request; 429 pauses
		graylb.WithPolicy(policy.P2C()))                     // power of two choices, peak-EWMA latency × calls in flight
	if err != nil {
		log.Fatal(err)
	}
	client := &http.Client{Transport: httpctx.NewTransport(lb)} // reports every call's result (a 5xx but 501 and 504 fails: WithFailureStatus)
	// gRPC: the picker reports each RPC (Unavailable, Internal, Unknown, DataLoss fail:
	// grpc.WithDefaultServiceConfig(grpcctx.ServiceConfigWithFailureCodes(...)) after DialOptions)
	// by hand: c := route.Start(); ...; c.End(result)
	// end snippet

	defer lb.Close()
	failed := 0
	for i := 0; i < 100; i++ {
		resp, err := client.Get("http://user-service/")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			failed++
		}
	}
	// Round robin alone sends a third (33) to the broken instance; the
	// ejection comes after its 5th consecutive failure at the latest.
	if failed > 5 {
		t.Errorf("%d of 100 requests failed", failed)
	}
}
