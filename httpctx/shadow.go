package httpctx

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/graylb/graylb/adapter"
	"github.com/graylb/graylb/shadow"
)

// WithMirror configures the Transport's mirroring of prod requests to the
// gray build (package shadow; the share is in the rules, ShadowPercent).
func WithMirror(opts ...shadow.Option) TransportOption {
	return func(t *Transport) { t.mirror = shadow.NewMirror(t.lb.LoadBalancer(), opts...) }
}

// refuseWrite is the error of a write (req) made for a shadow copy, told
// to the shadow observers.
func (t *Transport) refuseWrite(req *http.Request, host string) error {
	route := shadow.HTTPRoute(methodOf(req), req.URL.Path)
	shadow.Refused(t.lb.LoadBalancer(), host, route)
	return &shadow.WriteError{Service: host, Call: methodOf(req) + " " + req.URL.Path}
}

// mirrored follows a primary that tk mirrors: it sends the copy (and a
// second prod request when tk asks), beside the primary, and hands tk the
// primary's answer as its caller reads it (resp's body, teed up to the
// mirror's bound), or its error.
func (t *Transport) mirrored(req *http.Request, tk *shadow.Ticket, start time.Time, resp *http.Response, err error) *http.Response {
	go t.sendCopies(req, tk)
	if err != nil {
		tk.Primary(shadow.Answer{Err: err.Error(), Latency: time.Since(start)})
		return resp
	}
	resp.Body = &teeBody{rc: resp.Body, tk: tk, start: start, status: resp.StatusCode, max: t.mirror.MaxBody()}
	return resp
}

// sendCopies sends req's shadow copy to the gray build, and its second
// prod request when tk asks for one, each bounded by the copy timeout.
func (t *Transport) sendCopies(req *http.Request, tk *shadow.Ticket) {
	var wg sync.WaitGroup
	if tk.WantsSecondProd() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk.Second(t.copyAnswer(req, t.lb.SampleCopy(req.Context())))
		}()
	}
	tk.Copy(t.copyAnswer(req, adapter.ShadowCopy(req.Context())))
	wg.Wait()
}

// copyAnswer sends a copy of req with ctx (bounded by the copy timeout,
// never mirrored itself) and reads its answer up to the mirror's bound.
func (t *Transport) copyAnswer(req *http.Request, ctx context.Context) shadow.Answer {
	ctx, cancel := context.WithTimeout(ctx, t.mirror.CopyTimeout())
	defer cancel()
	c := req.Clone(ctx)
	if req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return shadow.Answer{Err: err.Error()}
		}
		c.Body = body
	}
	start := time.Now()
	resp, err := t.roundTrip(c, false)
	if err != nil {
		return shadow.Answer{Err: err.Error(), Latency: time.Since(start)}
	}
	defer resp.Body.Close()
	body, complete, err := readBounded(resp.Body, t.mirror.MaxBody())
	a := shadow.Answer{Status: resp.StatusCode, Latency: time.Since(start)}
	if err != nil {
		a.Err = err.Error()
	} else if complete {
		a.Body = body
	}
	return a
}

// readBounded reads r to its end, keeping at most max bytes; complete is
// false when there were more.
func readBounded(r io.Reader, max int) (b []byte, complete bool, err error) {
	b, err = io.ReadAll(io.LimitReader(r, int64(max)+1))
	if len(b) > max {
		io.Copy(io.Discard, r)
		return nil, false, err
	}
	return b, true, err
}

// teeBody is a mirrored primary's body: what its caller reads is kept (up
// to max bytes) and, once the body ends, handed to the ticket with the
// primary's status and latency.
type teeBody struct {
	rc     io.ReadCloser
	tk     *shadow.Ticket
	start  time.Time
	status int
	max    int
	buf    []byte
	over   bool
	once   sync.Once
}

func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if !b.over {
		if len(b.buf)+n > b.max {
			b.over, b.buf = true, nil
		} else {
			b.buf = append(b.buf, p[:n]...)
		}
	}
	switch {
	case err == io.EOF:
		b.end(true, "")
	case err != nil:
		b.end(false, err.Error())
	}
	return n, err
}

func (b *teeBody) Close() error {
	err := b.rc.Close()
	b.end(false, "")
	return err
}

// end hands the primary's answer to the ticket, once: its body when read
// to its end within the bound.
func (b *teeBody) end(eof bool, failed string) {
	b.once.Do(func() {
		a := shadow.Answer{Status: b.status, Latency: time.Since(b.start), Err: failed}
		if eof && !b.over {
			a.Body = b.buf
			if a.Body == nil {
				a.Body = []byte{}
			}
		}
		b.tk.Primary(a)
	})
}
