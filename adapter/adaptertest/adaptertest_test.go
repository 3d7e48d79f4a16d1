package adaptertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Respond answers with the instance, the keys received (names lowered, the
// values of one name in any letter case together) and the next call's
// answer; it fails while Fail holds, and waits for the call's end while
// Hang holds.
func TestRespond(t *testing.T) {
	next := Client(func(ctx context.Context, keys map[string]string) (Answer, error) {
		return Answer{Instance: "gray-1"}, nil
	})
	var fail, hang atomic.Bool
	o := ServerOptions{ID: "edge", Next: next, Fail: &fail, Hang: &hang}
	a, err := Respond(context.Background(), o, map[string][]string{"Gray": {"true"}, "gray": {"TRUE"}, "X-Lane": {"a"}})
	require.NoError(t, err)
	assert.Equal(t, "edge", a.Instance)
	assert.ElementsMatch(t, []string{"true", "TRUE"}, a.Keys["gray"])
	assert.Equal(t, "a", a.Key("X-LANE"))
	assert.True(t, a.Has("x-lane"))
	assert.False(t, a.Has("uid"))
	require.NotNil(t, a.Next)
	assert.Equal(t, "edge>gray-1", path(a))

	b, err := ParseAnswer(a.Encode())
	require.NoError(t, err)
	assert.Equal(t, a, b)

	o.Next = func(context.Context, map[string]string) (Answer, error) { return Answer{}, errors.New("refused") }
	a, err = Respond(context.Background(), o, nil)
	require.NoError(t, err)
	assert.Equal(t, "refused", a.NextErr)
	assert.Equal(t, "edge>error: refused", path(a))

	fail.Store(true)
	_, err = Respond(context.Background(), o, nil)
	assert.ErrorIs(t, err, ErrFailing)

	hang.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = Respond(ctx, o, nil)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

// Respond answers a Fault while Fault holds one, and FaultOf reads it back;
// each fault has its status on each transport.
func TestRespondFault(t *testing.T) {
	var fault atomic.Uint32
	o := ServerOptions{ID: "prod-1", Fault: &fault}
	a, err := Respond(context.Background(), o, nil)
	require.NoError(t, err)
	assert.Equal(t, "prod-1", a.Instance)
	_, ok := FaultOf(err)
	assert.False(t, ok)
	_, ok = FaultOf(ErrFailing)
	assert.False(t, ok)
	for _, c := range []struct {
		f      Fault
		name   string
		status int
		code   uint32
	}{
		{ServerError, "server-error", 503, 14},
		{OwnTimeout, "own-timeout", 504, 4},
		{NotImplemented, "not-implemented", 501, 12},
		{ClientError, "client-error", 404, 5},
		{Overloaded, "overloaded", 429, 8},
		{Fault(99), "Fault(99)", 200, 0},
	} {
		fault.Store(uint32(c.f))
		_, err := Respond(context.Background(), o, nil)
		f, ok := FaultOf(fmt.Errorf("wrapped: %w", err))
		assert.True(t, ok, "%v", err)
		assert.Equal(t, c.f, f)
		assert.Equal(t, c.name, c.f.String())
		assert.Equal(t, c.status, c.f.HTTPStatus(), c.name)
		assert.Equal(t, c.code, c.f.GRPCCode(), c.name)
	}
	assert.Equal(t, 200, NoFault.HTTPStatus())
	assert.Equal(t, uint32(0), NoFault.GRPCCode())
}

// Kill resets the connections a Listener accepted, and so those Proxy
// forwarded, and refuses new ones.
func TestListenerKillThroughProxy(t *testing.T) {
	up := Listen(t)
	go func() { // an echo server
		for {
			c, err := up.Accept()
			if err != nil {
				return
			}
			go io.Copy(c, c)
		}
	}()
	front := Listen(t)
	Proxy(front, up.Addr().String())
	c, err := net.Dial("tcp", front.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write([]byte("ping"))
	require.NoError(t, err)
	buf := make([]byte, 4)
	_, err = io.ReadFull(c, buf)
	require.NoError(t, err)
	assert.Equal(t, "ping", string(buf))

	front.Kill()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = c.Read(buf)
	require.Error(t, err, "the connection outlived the kill")
	assert.NotErrorIs(t, err, io.EOF, "a killed server's connection is reset, not closed: %v", err)
	_, err = net.DialTimeout("tcp", front.Addr().String(), time.Second)
	assert.Error(t, err, "a killed server accepts no connection")
}
