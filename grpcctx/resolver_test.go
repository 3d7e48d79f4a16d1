package grpcctx

import (
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"
)

// recordingCC records the resolver's pushes; during the first one it runs
// onFirst on another goroutine (as a registry push would arrive) and waits
// a little for it.
type recordingCC struct {
	mu      sync.Mutex
	states  []resolver.State
	onFirst func()
}

func (f *recordingCC) UpdateState(s resolver.State) error {
	f.mu.Lock()
	f.states = append(f.states, s)
	first := len(f.states) == 1
	f.mu.Unlock()
	if first && f.onFirst != nil {
		done := make(chan struct{})
		go func() { f.onFirst(); close(done) }()
		select {
		case <-done:
		case <-time.After(50 * time.Millisecond): // the change waits for this push to end
		}
	}
	return nil
}

// last returns the last state pushed; the zero State before any (the
// resolver looks its service up apart from Build, so none may have come
// yet).
func (f *recordingCC) last() resolver.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.states) == 0 {
		return resolver.State{}
	}
	return f.states[len(f.states)-1]
}

func (f *recordingCC) ReportError(error)                                    {}
func (f *recordingCC) NewAddress([]resolver.Address)                        {}
func (f *recordingCC) ParseServiceConfig(string) *serviceconfig.ParseResult { return nil }

// A list change that lands while the resolver is being built is pushed:
// the balancer never keeps an instance's old kind (prod would reach an
// instance that turned gray).
func TestResolver_ChangeDuringBuildIsPushed(t *testing.T) {
	reg := graylb.NewRegistry()
	require.NoError(t, reg.Register(graylb.NewInstance("svc", "10.0.0.1", 80, nil)))
	require.NoError(t, reg.Register(graylb.NewInstance("svc", "10.0.0.2", 80, nil)))
	lb, err := graylb.New(reg, graylb.WithContextHandler(Handler()))
	require.NoError(t, err)
	defer lb.Close()
	cc := &recordingCC{onFirst: func() { require.NoError(t, reg.SetMetadata("svc", "10.0.0.2:80", "gray", "true")) }}
	u, _ := url.Parse("graylb:///svc")
	r, err := NewResolverBuilder(lb).Build(resolver.Target{URL: *u}, cc, resolver.BuildOptions{})
	require.NoError(t, err)
	defer r.Close()
	require.Eventually(t, func() bool {
		for _, a := range cc.last().Addresses {
			if in, _ := InstanceOf(a); in.Addr() == "10.0.0.2:80" {
				return in.Metadata["gray"] == "true"
			}
		}
		return false
	}, 5*time.Second, time.Millisecond, "the flip to gray during Build never reached the balancer")
}
