package adaptertest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// restBytes is the rest of an HTTP answer's body after the Answer's line:
// blanks, which a JSON decoder of the whole body skips.
var restBytes = []byte("                \n")

// WriteHTTP writes a, the Answer to the HTTP call r, to w as every HTTP
// driver's server does: a 200 whose body is the Answer's line (Encode and
// a newline) and then the rest (blanks), the rest as o.Rest says (see
// Rest). A JSON decoder of the whole body reads the Answer.
func WriteHTTP(w http.ResponseWriter, r *http.Request, o ServerOptions, a Answer) {
	w.Header().Set("Content-Type", "application/json")
	line := append(a.Encode(), '\n')
	rest := RestOf(o)
	if rest == RestAtOnce {
		w.Write(append(line, restBytes...))
		return
	}
	rc := http.NewResponseController(w)
	w.WriteHeader(http.StatusOK)
	w.Write(line)
	rc.Flush()
	switch rest {
	case RestLate:
		select {
		case <-time.After(RestDelay):
			w.Write(restBytes)
		case <-r.Context().Done():
		}
	case RestBreak:
		conn, _, err := rc.Hijack()
		if err != nil {
			panic(http.ErrAbortHandler) // the server resets the stream
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		conn.Close()
	default: // RestStall
		<-r.Context().Done()
	}
}

// HTTPStream returns a StreamClient that calls GET url with c, the keys as
// headers (http.Header.Add, spelled as given), on a server that answers
// with WriteHTTP.
func HTTPStream(c *http.Client, url string) StreamClient {
	return func(ctx context.Context, keys map[string]string, whole bool) (Answer, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return Answer{}, err
		}
		for k, v := range keys {
			req.Header.Add(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			return Answer{}, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			return Answer{}, fmt.Errorf("status %d: %s", resp.StatusCode, b)
		}
		br := bufio.NewReader(resp.Body)
		line, err := br.ReadBytes('\n')
		if err != nil {
			return Answer{}, fmt.Errorf("the answer's first line: %w", err)
		}
		a, err := ParseAnswer(line)
		if err != nil || !whole {
			return a, err // closed before its end
		}
		if _, err := io.Copy(io.Discard, br); err != nil {
			return a, fmt.Errorf("the rest of the answer: %w", err)
		}
		return a, nil
	}
}
