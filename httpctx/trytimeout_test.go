package httpctx

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/stretchr/testify/require"
)

// With a try timeout, a request sent into an instance that never answers
// (a black hole beside a working instance of its kind) is answered by the
// other instance: no request fails, none waits for its own deadline, and
// the black hole's tries count against it, so outlier detection ejects it.
// Without one, every request picked onto the black hole fails at its
// deadline.
func TestTransport_TryTimeoutAnswersAroundABlackHole(t *testing.T) {
	for _, tc := range []struct {
		name       string
		tryTimeout time.Duration
	}{
		{"no try timeout", 0},
		{"try timeout 150ms", 150 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := graylb.NewRegistry()
			gray := answering("gray")
			defer gray.Close()
			prod := answering("prod")
			defer prod.Close()
			register(t, reg, "svc", gray, map[string]string{"gray": "true"})
			register(t, reg, "svc", prod, nil)
			blackHole(t, reg, "svc", map[string]string{"gray": "true"})
			var ejections atomic.Int64
			lb, err := graylb.New(reg, graylb.WithOutlierDetection(graylb.OutlierConfig{
				ConsecutiveFailures: 3, OnEjection: func(e graylb.Ejection) { ejections.Add(1) },
			}))
			require.NoError(t, err)
			defer lb.Close()
			client := &http.Client{Transport: NewTransport(lb, WithTryTimeout(tc.tryTimeout))}
			failed, slow := 0, 0
			for i := 0; i < 20; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://svc/", nil)
				req.Header.Set("gray", "true")
				start := time.Now()
				resp, err := client.Do(req)
				if time.Since(start) > 900*time.Millisecond {
					slow++
				}
				if err != nil {
					failed++
				} else {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					require.Equal(t, "gray", string(b), "a gray request answered by another kind")
				}
				cancel()
			}
			if tc.tryTimeout == 0 {
				require.NotZero(t, failed, "without a try timeout the black hole fails the requests picked onto it")
				return
			}
			require.Zero(t, failed, "gray requests failed with a working gray instance listed")
			require.Zero(t, slow, "a request waited for its own deadline")
			require.NotZero(t, ejections.Load(), "the black hole's timed-out tries did not count against it")
		})
	}
}

// A request that is not idempotent is not sent again after its try timed
// out (the instance may have acted on it): it fails with ErrTryTimeout,
// naming the instance, long before its own deadline.
func TestTransport_TryTimeoutDoesNotResendAPost(t *testing.T) {
	reg := graylb.NewRegistry()
	in := blackHole(t, reg, "svc", nil)
	lb, err := graylb.New(reg)
	require.NoError(t, err)
	defer lb.Close()
	client := &http.Client{Transport: NewTransport(lb, WithTryTimeout(100*time.Millisecond))}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://svc/orders", bytes.NewReader([]byte("{}")))
	start := time.Now()
	_, err = client.Do(req)
	require.Error(t, err)
	require.True(t, errors.Is(err, ErrTryTimeout), "%v", err)
	require.True(t, errors.Is(err, ErrConnectionFailed), "%v", err)
	require.Contains(t, err.Error(), in.Addr())
	require.True(t, strings.Contains(err.Error(), "not idempotent"), "%v", err)
	require.Less(t, time.Since(start), 2*time.Second)
}

// A response whose headers came within the try timeout is read whole,
// however long its body takes.
func TestTransport_TryTimeoutDoesNotCutABody(t *testing.T) {
	reg := graylb.NewRegistry()
	srv := slowBody(300 * time.Millisecond)
	defer srv.Close()
	register(t, reg, "svc", srv, nil)
	lb, err := graylb.New(reg)
	require.NoError(t, err)
	defer lb.Close()
	client := &http.Client{Transport: NewTransport(lb, WithTryTimeout(100*time.Millisecond))}
	resp, err := client.Get("http://svc/")
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, "head...tail", string(b))
}

// slowBody answers at once with the first half of its body and the rest
// after d.
func slowBody(d time.Duration) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "head...")
		w.(http.Flusher).Flush()
		time.Sleep(d) // must sleep: the body must outlast the try timeout
		io.WriteString(w, "tail")
	}))
}

// The try timeout runs from the moment the request was written: an upload
// that takes longer than it to a healthy instance is answered, and the
// instance is not charged.
func TestTransport_TryTimeoutStartsOnceTheRequestIsWritten(t *testing.T) {
	reg := graylb.NewRegistry()
	srv := answering("ok")
	defer srv.Close()
	register(t, reg, "svc", srv, nil)
	lb, err := graylb.New(reg)
	require.NoError(t, err)
	defer lb.Close()
	client := &http.Client{Transport: NewTransport(lb, WithTryTimeout(100*time.Millisecond))}
	req, _ := http.NewRequest(http.MethodPost, "http://svc/upload", &slowReader{data: []byte("hello"), pause: 60 * time.Millisecond})
	resp, err := client.Do(req)
	require.NoError(t, err, "a slow upload to a healthy instance failed its try timeout")
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// slowReader yields its data a byte at a time, pausing before each.
type slowReader struct {
	data  []byte
	pause time.Duration
}

func (r *slowReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	time.Sleep(r.pause) // must sleep: the upload must outlast the try timeout
	p[0], r.data = r.data[0], r.data[1:]
	return 1, nil
}

// A protocol switch's body stays the writable connection it is with a try
// timeout set.
func TestTransport_TryTimeoutKeepsAnUpgradedBodyWritable(t *testing.T) {
	reg := graylb.NewRegistry()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		buf.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		buf.Flush()
		io.Copy(conn, conn)
	}))
	defer srv.Close()
	register(t, reg, "svc", srv, nil)
	lb, err := graylb.New(reg)
	require.NoError(t, err)
	defer lb.Close()
	client := &http.Client{Transport: NewTransport(lb, WithTryTimeout(time.Second))}
	req, _ := http.NewRequest(http.MethodGet, "http://svc/", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "echo")
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	rw, ok := resp.Body.(io.ReadWriteCloser)
	require.True(t, ok, "the upgraded body is not writable")
	_, err = rw.Write([]byte("ping"))
	require.NoError(t, err)
	got := make([]byte, 4)
	_, err = io.ReadFull(rw, got)
	require.NoError(t, err)
	require.Equal(t, "ping", string(got))
}
