package adapter_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/graylb/graylb/adapter"
	"github.com/stretchr/testify/assert"
)

// HTTPResult reads every status as its doc says, hostile ones included.
func TestHTTPResult(t *testing.T) {
	for _, c := range []struct {
		status int
		want   adapter.Result
	}{
		{200, adapter.OK}, {204, adapter.OK}, {301, adapter.OK}, {400, adapter.OK}, {404, adapter.OK},
		{429, adapter.Overloaded}, {498, adapter.OK}, {499, adapter.Cancelled},
		{500, adapter.Failed}, {501, adapter.OK}, {502, adapter.Failed}, {503, adapter.Failed},
		{504, adapter.DeadlineAnswered}, {505, adapter.Failed}, {599, adapter.Failed},
		{100, adapter.OK}, {600, adapter.OK}, {999, adapter.OK}, {0, adapter.OK}, {-503, adapter.OK},
		{math.MaxInt, adapter.OK}, {math.MinInt, adapter.OK},
	} {
		assert.Equal(t, c.want, adapter.HTTPResult(c.status), "status %d", c.status)
	}
}

// GRPCResult reads each gRPC status code as HTTPResult reads the HTTP
// status it stands for.
func TestGRPCResult(t *testing.T) {
	for _, c := range []struct {
		code   uint32 // google.golang.org/grpc/codes, by number
		status int
		want   adapter.Result
	}{
		{0, 200, adapter.OK},                  // OK
		{1, 499, adapter.Cancelled},           // Canceled
		{2, 500, adapter.Failed},              // Unknown
		{3, 400, adapter.OK},                  // InvalidArgument
		{4, 504, adapter.DeadlineAnswered},    // DeadlineExceeded
		{5, 404, adapter.OK},                  // NotFound
		{6, 409, adapter.OK},                  // AlreadyExists
		{7, 403, adapter.OK},                  // PermissionDenied
		{8, 429, adapter.Overloaded},          // ResourceExhausted
		{9, 400, adapter.OK},                  // FailedPrecondition
		{10, 409, adapter.OK},                 // Aborted
		{11, 400, adapter.OK},                 // OutOfRange
		{12, 501, adapter.OK},                 // Unimplemented
		{13, 500, adapter.Failed},             // Internal
		{14, 503, adapter.Failed},             // Unavailable
		{15, 500, adapter.Failed},             // DataLoss
		{16, 401, adapter.OK},                 // Unauthenticated
		{17, 500, adapter.Failed},             // not a code gRPC defines
		{math.MaxUint32, 500, adapter.Failed}, // nor this
	} {
		t.Run(fmt.Sprint(c.code), func(t *testing.T) {
			assert.Equal(t, c.status, adapter.GRPCStatusHTTP(c.code))
			assert.Equal(t, c.want, adapter.GRPCResult(c.code))
			assert.Equal(t, adapter.HTTPResult(c.status), adapter.GRPCResult(c.code))
		})
	}
}

func ExampleHTTPResult() {
	for _, status := range []int{200, 404, 429, 500, 501, 503, 504} {
		fmt.Println(status, adapter.HTTPResult(status))
	}
	// Output:
	// 200 ok
	// 404 ok
	// 429 overloaded
	// 500 failed
	// 501 ok
	// 503 failed
	// 504 deadline-answered
}

// ParseRetryAfter reads delay-seconds and HTTP-dates, caps them, and
// reads anything else (hostile values included) as no pause.
func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		v    string
		want time.Duration
	}{
		{"", 0}, {"0", 0}, {"30", 30 * time.Second}, {"120", 2 * time.Minute},
		{"Fri, 04 Dec 2026 12:00:45 GMT", 45 * time.Second},
		{"Fri, 04 Dec 2026 11:00:00 GMT", 0}, // past
		{"99999999999999999999", adapter.MaxRetryAfter}, {"864000", adapter.MaxRetryAfter},
		{"-5", 0}, {"+5", 0}, {" 5", 0}, {"5s", 0}, {"1.5", 0}, {"tomorrow", 0}, {"\x00", 0},
		{"Fri, 04 Dec 9999 12:00:45 GMT", adapter.MaxRetryAfter},
	} {
		assert.Equal(t, c.want, adapter.ParseRetryAfter(c.v, now), "%q", c.v)
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	f.Add("30")
	f.Add("Fri, 04 Dec 2026 12:00:45 GMT")
	now := time.Now()
	f.Fuzz(func(t *testing.T, v string) {
		d := adapter.ParseRetryAfter(v, now)
		if d < 0 || d > adapter.MaxRetryAfter {
			t.Fatalf("%q: %v", v, d)
		}
	})
}
