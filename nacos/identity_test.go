package nacos

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/httpctx"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// capturingRegistrar records the metadata of each registration.
type capturingRegistrar struct {
	*fakeRegistrar
	mu   sync.Mutex
	meta []map[string]string
}

func (c *capturingRegistrar) RegisterInstance(p vo.RegisterInstanceParam) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.meta = append(c.meta, p.Metadata)
	return true, nil
}

// keysAndKind is a registration's metadata without the process's start
// (MetadataStarted, which every registration carries).
func keysAndKind(t *testing.T, m map[string]string) map[string]string {
	t.Helper()
	require.NotEmpty(t, m[MetadataStarted], "every registration says when its process started")
	m = maps.Clone(m)
	delete(m, MetadataStarted)
	return m
}

func newLBFor(t *testing.T, opts ...graylb.Option) *graylb.LoadBalancer {
	t.Helper()
	lb, err := graylb.New(graylb.NewRegistry(), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { lb.Close() })
	return lb
}

// With WithLoadBalancer the registration writes the LoadBalancer's keys
// and kind; a Service or an environment that says otherwise is refused.
func TestRegister_WithLoadBalancer(t *testing.T) {
	t.Setenv(EnvGray, "")
	lb := newLBFor(t, graylb.WithGrayKey("gray-tag"), graylb.WithSelfGray(true))
	f := &capturingRegistrar{fakeRegistrar: newFakeRegistrar()}
	reg, err := Register(context.Background(), Service{Name: "svc", Host: "127.0.0.1", Port: 8080, Version: "v2"},
		WithNamingClient(f), WithLoadBalancer(lb))
	require.NoError(t, err)
	defer reg.Close()
	assert.Equal(t, map[string]string{"gray-tag": "true", "version": "v2"}, keysAndKind(t, f.meta[0]))

	svc := Service{Name: "svc", Host: "127.0.0.1", Port: 8081, GrayKey: "gray"}
	_, err = Register(context.Background(), svc, WithNamingClient(f), WithLoadBalancer(lb))
	require.ErrorIs(t, err, ErrMismatch)
	assert.Contains(t, err.Error(), `"gray-tag"`)

	prod := false
	_, err = Register(context.Background(), Service{Name: "svc", Host: "127.0.0.1", Port: 8081, Gray: &prod}, WithNamingClient(f), WithLoadBalancer(lb))
	require.ErrorIs(t, err, ErrMismatch, "Service.Gray against the LoadBalancer's own flag")

	prodLB := newLBFor(t, graylb.WithGrayKey("gray-tag"))
	t.Setenv(EnvGray, "true")
	_, err = Register(context.Background(), Service{Name: "svc", Host: "127.0.0.1", Port: 8081}, WithNamingClient(f), WithLoadBalancer(prodLB))
	require.ErrorIs(t, err, ErrMismatch, "the environment says gray, the LoadBalancer prod")
	assert.Contains(t, err.Error(), "GrayFromEnv")
	assert.Len(t, f.meta, 1, "nothing registered when refused")
}

// Without WithLoadBalancer the registration takes the key the process's
// LoadBalancers read, and refuses one that none of them reads.
func TestRegister_KeysOfTheProcess(t *testing.T) {
	t.Setenv(EnvGray, "")
	f := &capturingRegistrar{fakeRegistrar: newFakeRegistrar()}
	lb := newLBFor(t, graylb.WithGrayKey("gray-tag"))
	gray := true
	reg, err := Register(context.Background(), Service{Name: "svc", Host: "127.0.0.1", Port: 8080, Gray: &gray}, WithNamingClient(f))
	require.NoError(t, err)
	defer reg.Close()
	assert.Equal(t, map[string]string{"gray-tag": "true"}, keysAndKind(t, f.meta[0]), "the key the process's LoadBalancer reads")

	_, err = Register(context.Background(), Service{Name: "svc", Host: "127.0.0.1", Port: 8081, GrayKey: "gray"}, WithNamingClient(f))
	require.ErrorIs(t, err, ErrMismatch, "a key no LoadBalancer of the process reads")

	other := newLBFor(t) // reads "gray"
	_, err = Register(context.Background(), Service{Name: "svc", Host: "127.0.0.1", Port: 8081}, WithNamingClient(f))
	require.ErrorIs(t, err, ErrMismatch, "LoadBalancers that disagree: the registration must name its key")
	reg2, err := Register(context.Background(), Service{Name: "svc", Host: "127.0.0.1", Port: 8081}, WithNamingClient(f), WithLoadBalancer(other))
	require.NoError(t, err)
	defer reg2.Close()
	lb.Close()
	other.Close()
	reg3, err := Register(context.Background(), Service{Name: "svc", Host: "127.0.0.1", Port: 8082}, WithNamingClient(f))
	require.NoError(t, err, "no LoadBalancer left: the default key")
	defer reg3.Close()
	assert.Equal(t, "false", f.meta[len(f.meta)-1]["gray"])
}

// With WithLoadBalancer, Deregister waits until the LoadBalancer's server
// sides admit no call for the quiet period: a caller that cached the list
// keeps calling after the removal, and is drained. Calls that go on past
// the drain maximum are reported.
func TestRegistration_DeregisterWaitsForCallers(t *testing.T) {
	lb := newLBFor(t)
	srv := httptest.NewServer(httpctx.Middleware(lb)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	defer srv.Close()
	f := newFakeRegistrar()
	reg := registerFake(t, f, WithLoadBalancer(lb), WithDrainWait(0), WithQuietPeriod(150*time.Millisecond), WithDrainMax(time.Minute))

	stopCalling := make(chan struct{})
	callerDone := make(chan struct{})
	go func() { // a caller whose cache still holds the instance
		defer close(callerDone)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopCalling:
				return
			case <-tick.C:
				if resp, err := srv.Client().Get(srv.URL); err == nil {
					resp.Body.Close()
				}
			}
		}
	}()
	deregistered := make(chan error, 1)
	go func() { deregistered <- reg.Deregister(context.Background()) }()
	within(t, f.deregistered, 10*time.Second, "the instance deregistered")
	select {
	case err := <-deregistered:
		t.Fatalf("Deregister returned (%v) while the caller kept calling", err)
	case <-time.After(600 * time.Millisecond): // the caller's cache outlives the removal
	}
	close(stopCalling)
	<-callerDone
	select {
	case err := <-deregistered:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Deregister did not return once the caller stopped")
	}

	// A caller that never stops: the drain maximum ends the wait, and
	// the error says so.
	f2 := newFakeRegistrar()
	reg2, err := Register(context.Background(), Service{Name: "svc2", Host: "127.0.0.1", Port: 8081},
		WithNamingClient(f2), WithLoadBalancer(lb), WithDrainWait(0), WithQuietPeriod(time.Hour), WithDrainMax(300*time.Millisecond))
	require.NoError(t, err)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
				if resp, err := srv.Client().Get(srv.URL); err == nil {
					resp.Body.Close()
				}
			}
		}
	}()
	err = reg2.Deregister(context.Background())
	require.ErrorIs(t, err, ErrCallersRemain)
	assert.Contains(t, err.Error(), "127.0.0.1:8081")
}
