package nacos

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeNaming embeds nothing it does not need: the three calls the
// Supplier makes.
type fakeNaming struct {
	mu          sync.Mutex
	hosts       []model.Instance
	err         error
	subErr      error
	subscribed  []*vo.SubscribeParam
	unsubscribe []*vo.SubscribeParam
	block       chan struct{}
}

func (f *fakeNaming) SelectAllInstances(vo.SelectAllInstancesParam) ([]model.Instance, error) {
	if f.block != nil {
		<-f.block
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hosts, f.err
}

func (f *fakeNaming) Subscribe(p *vo.SubscribeParam) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subscribed = append(f.subscribed, p)
	return f.subErr
}

func (f *fakeNaming) Unsubscribe(p *vo.SubscribeParam) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unsubscribe = append(f.unsubscribe, p)
	return nil
}

func host(port uint64, healthy, enabled bool, weight float64, md map[string]string) model.Instance {
	return model.Instance{Ip: "10.0.0.1", Port: port, Healthy: healthy, Enable: enabled, Weight: weight, Metadata: md}
}

func TestSupplier_KeepsOnlyUsableHosts(t *testing.T) {
	f := &fakeNaming{hosts: []model.Instance{
		host(1, true, true, 1, map[string]string{"gray": "true"}),
		host(2, false, true, 1, nil), host(3, true, false, 1, nil), host(4, true, true, 0, nil),
		host(5, true, true, 0.3, nil), host(0, true, true, 1, nil),
	}}
	s := newSupplier(f, newConfig(nil))
	got, err := s.Instances(context.Background(), "svc")
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, "10.0.0.1:1", got[0].Addr())
	assert.Equal(t, "true", got[0].Metadata["gray"])
	assert.Equal(t, 0.3, got[1].Weight, "fractional weights are kept as they are")
}

func TestSupplier_OneSubscriptionPerServiceFannedOut(t *testing.T) {
	f := &fakeNaming{}
	s := newSupplier(f, newConfig(nil))
	var a, b [][]graylb.Instance
	stopA, err := s.Watch("svc", func(l []graylb.Instance) { a = append(a, l) })
	require.NoError(t, err)
	stopB, err := s.Watch("svc", func(l []graylb.Instance) { b = append(b, l) })
	require.NoError(t, err)
	require.Len(t, f.subscribed, 1)

	push := f.subscribed[0].SubscribeCallback
	push([]model.Instance{host(1, true, true, 1, nil), host(2, false, true, 1, nil)}, nil)
	require.Len(t, a, 1)
	assert.Len(t, a[0], 1, "raw hosts are filtered")
	stopA()
	assert.Empty(t, f.unsubscribe, "another watcher remains (nacos-sdk-go #835)")
	push(nil, nil)
	assert.Len(t, a, 1)
	assert.Len(t, b, 2)
	push(nil, errors.New("push error"))
	assert.Len(t, b, 2, "an errored push changes nothing")
	stopB()
	require.Len(t, f.unsubscribe, 1)
	assert.Same(t, f.subscribed[0], f.unsubscribe[0], "unsubscribe with the same param pointer")
}

func TestSupplier_SubscribeErrorIsNotFatal(t *testing.T) {
	f := &fakeNaming{subErr: errors.New("client not connected\nstack...")}
	s := newSupplier(f, newConfig(nil))
	stop, err := s.Watch("svc", func([]graylb.Instance) {})
	require.NoError(t, err, "the SDK keeps the subscription for redo")
	stop()
}

func TestSupplier_ErrorsAndClose(t *testing.T) {
	f := &fakeNaming{err: errors.New("boom")}
	s := newSupplier(f, newConfig(nil))
	_, err := s.Instances(context.Background(), "svc")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"svc"`)
	_, err = s.Instances(context.Background(), "")
	require.ErrorIs(t, err, graylb.ErrInvalidService)
	_, err = s.Watch("svc", nil)
	require.Error(t, err)

	f.block = make(chan struct{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = s.Instances(ctx, "svc")
	require.ErrorIs(t, err, context.DeadlineExceeded, "a hung SDK call does not hang the caller")
	close(f.block)

	_, err = s.Watch("svc", func([]graylb.Instance) {})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.Len(t, f.unsubscribe, 1)
	require.NoError(t, s.Close())
	_, err = s.Instances(context.Background(), "svc")
	require.ErrorIs(t, err, graylb.ErrClosed)
	_, err = s.Watch("svc", func([]graylb.Instance) {})
	require.ErrorIs(t, err, graylb.ErrClosed)
}

func TestOptions_BadInputAndRedaction(t *testing.T) {
	for _, servers := range [][]string{{}, {"nohost"}, {"h:0"}, {"h:70000"}, {":8848"}} {
		_, err := NewSupplier(WithServers(servers...))
		require.ErrorIs(t, err, ErrConfig, "%v", servers)
	}
	c := newConfig([]Option{WithCredentials("user", "s3cret-pass"), WithAccessKey("AKID123", "SK-secret")})
	err := redact(errors.New("auth failed for user with s3cret-pass and SK-secret"), c)
	assert.NotContains(t, err.Error(), "s3cret-pass")
	assert.NotContains(t, err.Error(), "SK-secret")
	assert.True(t, strings.Contains(err.Error(), "[redacted]"))
	assert.Equal(t, "first", firstLine(errors.New("first\nsecond")))
}

func TestRegister_BadInput(t *testing.T) {
	_, err := Register(context.Background(), Service{Name: "svc", Host: "", Port: 1})
	require.ErrorIs(t, err, graylb.ErrInvalidInstance)
	_, err = Register(context.Background(), Service{Name: "svc", Host: "h", Port: 1}, WithServers("bad"))
	require.ErrorIs(t, err, ErrConfig)
}
