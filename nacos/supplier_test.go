package nacos

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
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

// fakeNaming stands in for a Client: the server's list (hosts), the
// client's cached list, and the subscriptions.
type fakeNaming struct {
	mu           sync.Mutex
	hosts        []model.Instance
	err          error
	cache        []model.Instance
	subErr       error
	subscribed   []*vo.SubscribeParam
	unsubscribed []*vo.SubscribeParam
	block        chan struct{}
	queries      int
	until        time.Time
}

func (f *fakeNaming) query(ctx context.Context, _, _ string, _ []string) ([]model.Instance, error) {
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries++
	return f.hosts, f.err
}

func (f *fakeNaming) cached(string, string, []string) ([]model.Instance, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cache, f.cache != nil
}

func (f *fakeNaming) subscribe(p *vo.SubscribeParam) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subscribed = append(f.subscribed, p)
	return f.subErr
}

func (f *fakeNaming) unsubscribe(p *vo.SubscribeParam) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unsubscribed = append(f.unsubscribed, p)
	return nil
}

func (f *fakeNaming) healthy() bool { return true }

func (f *fakeNaming) RefillUntil() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.until }

func (f *fakeNaming) set(hosts []model.Instance) { f.mu.Lock(); f.hosts = hosts; f.mu.Unlock() }

func host(port uint64, healthy, enabled bool, weight float64, md map[string]string) model.Instance {
	return model.Instance{Ip: "10.0.0.1", Port: port, Healthy: healthy, Enable: enabled, Weight: weight, Metadata: md}
}

func noReconcile() *config { c := newConfig(nil); c.reconcile = 0; return c }

func TestSupplier_KeepsOnlyUsableHosts(t *testing.T) {
	f := &fakeNaming{hosts: []model.Instance{
		host(1, true, true, 1, map[string]string{"gray": "true"}),
		host(2, false, true, 1, nil), host(3, true, false, 1, nil), host(4, true, true, 0, nil),
		host(5, true, true, 0.3, nil), host(0, true, true, 1, nil),
	}}
	s := newSupplier(f, noReconcile())
	defer s.Close()
	got, err := s.Instances(context.Background(), "svc")
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, "10.0.0.1:1", got[0].Addr())
	assert.Equal(t, "true", got[0].Metadata["gray"])
	assert.Equal(t, 0.3, got[1].Weight, "fractional weights are kept as they are")
}

// Hosts that could build a URL or header injection, and hosts no gray rule
// could name (an IPv4 address with a leading zero, IPv4 shorthands, hex
// spellings the C library reads as 127.0.0.1, an all-digit last label),
// are dropped, each with a log line.
func TestSupplier_DropsInvalidHostsWithALogLine(t *testing.T) {
	bad := []string{"evil.com/x?y=", "a\r\nX: y", "h#frag", "user@h", "h h", "\x00",
		"010.0.0.7", "10.7", "167772167", "host.123", "0x7f000001", "0x7f.0.0.0x1"}
	hosts := []model.Instance{host(1, true, true, 1, nil)}
	for i, h := range bad {
		in := host(uint64(10+i), true, true, 1, nil)
		in.Ip = h
		hosts = append(hosts, in)
	}
	var buf bytes.Buffer
	c := noReconcile()
	c.logger = slog.New(slog.NewTextHandler(&buf, nil))
	s := newSupplier(&fakeNaming{hosts: hosts}, c)
	defer s.Close()
	got, err := s.Instances(context.Background(), "svc")
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "10.0.0.1:1", got[0].Addr())
	for _, h := range bad {
		if strings.ContainsAny(h, "/\r\n\x00") { // what every validator refuses
			assert.Contains(t, buf.String(), "dropped an invalid instance", "%q", h)
		}
	}
	assert.Equal(t, len(hosts)-1, strings.Count(buf.String(), "dropped an invalid instance"))
}

func TestSupplier_OneSubscriptionPerServiceFannedOut(t *testing.T) {
	f := &fakeNaming{}
	s := newSupplier(f, noReconcile())
	defer s.Close()
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
	assert.Empty(t, f.unsubscribed, "another watcher remains (nacos-sdk-go #835)")
	push(nil, nil)
	assert.Len(t, a, 1)
	assert.Len(t, b, 2)
	push(nil, errors.New("push error"))
	assert.Len(t, b, 2, "an errored push changes nothing")
	stopB()
	require.Len(t, f.unsubscribed, 1)
	assert.Same(t, f.subscribed[0], f.unsubscribed[0], "unsubscribe with the same param pointer")
}

// Reconciliation hands over the server's list when it differs from the
// last one (a lost or dropped push), and nothing when it is the same.
func TestSupplier_ReconcilesWithTheServer(t *testing.T) {
	f := &fakeNaming{hosts: []model.Instance{host(1, true, true, 1, nil)}}
	s := newSupplier(f, noReconcile())
	defer s.Close()
	var mu sync.Mutex
	var got [][]graylb.Instance
	_, err := s.Watch("svc", func(l []graylb.Instance) { mu.Lock(); got = append(got, l); mu.Unlock() })
	require.NoError(t, err)
	f.subscribed[0].SubscribeCallback(f.hosts, nil)
	s.reconcileOnce()
	mu.Lock()
	require.Len(t, got, 1, "same list: nothing handed over")
	mu.Unlock()

	f.set([]model.Instance{host(1, true, true, 1, nil), host(2, true, true, 1, nil)}) // a push was lost
	s.reconcileOnce()
	mu.Lock()
	require.Len(t, got, 2)
	assert.Len(t, got[1], 2)
	mu.Unlock()

	f.set(nil) // the service went to zero: handed over (the Cache decides)
	s.reconcileOnce()
	mu.Lock()
	require.Len(t, got, 3)
	assert.Empty(t, got[2])
	mu.Unlock()
}

// The reconcile loop runs on its own at the configured period.
func TestSupplier_ReconcileLoop(t *testing.T) {
	f := &fakeNaming{hosts: []model.Instance{host(1, true, true, 1, nil)}}
	c := newConfig(nil)
	c.reconcile = 20 * time.Millisecond
	s := newSupplier(f, c)
	got := make(chan []graylb.Instance, 10)
	_, err := s.Watch("svc", func(l []graylb.Instance) { got <- l })
	require.NoError(t, err)
	select {
	case l := <-got:
		assert.Len(t, l, 1)
	case <-time.After(5 * time.Second):
		t.Fatal("no reconciliation within 5s")
	}
	require.NoError(t, s.Close())
}

// Without a server the Supplier serves the client's cached list, and
// without one fails at once with the cause.
func TestSupplier_UnreachableServer(t *testing.T) {
	f := &fakeNaming{err: ErrUnavailable}
	s := newSupplier(f, noReconcile())
	defer s.Close()
	start := time.Now()
	_, err := s.Instances(context.Background(), "svc")
	require.ErrorIs(t, err, ErrUnavailable)
	assert.Less(t, time.Since(start), time.Second)
	f.mu.Lock()
	f.cache = []model.Instance{host(1, true, true, 1, nil)}
	f.mu.Unlock()
	got, err := s.Instances(context.Background(), "svc")
	require.NoError(t, err)
	assert.Len(t, got, 1, "the cached list serves while the server is unreachable")
}

func TestSupplier_ReportsRefills(t *testing.T) {
	until := time.Now().Add(time.Minute)
	s := newSupplier(&fakeNaming{until: until}, noReconcile())
	defer s.Close()
	var r interface{ RefillUntil() time.Time } = s
	assert.Equal(t, until, r.RefillUntil())
}

func TestSupplier_SubscribeErrorIsNotFatal(t *testing.T) {
	f := &fakeNaming{subErr: errors.New("client not connected\nstack...")}
	s := newSupplier(f, noReconcile())
	defer s.Close()
	stop, err := s.Watch("svc", func([]graylb.Instance) {})
	require.NoError(t, err, "the SDK keeps the subscription for redo")
	stop()
}

func TestSupplier_ErrorsAndClose(t *testing.T) {
	f := &fakeNaming{err: errors.New("boom")}
	s := newSupplier(f, noReconcile())
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
	require.ErrorIs(t, err, context.DeadlineExceeded, "a hung call does not hang the caller")
	close(f.block)

	_, err = s.Watch("svc", func([]graylb.Instance) {})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.Len(t, f.unsubscribed, 1)
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

func TestOptions_Defaults(t *testing.T) {
	c := newConfig(nil)
	assert.Equal(t, "error", c.logLevel, "a quiet SDK by default")
	p, err := c.params()
	require.NoError(t, err)
	for _, dir := range []string{p.ClientConfig.CacheDir, p.ClientConfig.LogDir} {
		assert.Contains(t, dir, "graylb", "SDK folders under the user's cache folder, not beside the executable")
	}
	assert.EqualValues(t, 9848, p.ServerConfigs[0].GrpcPort)
}

// The SDK's disk cache goes to a folder of graylb's own inside the cache
// folder: never where an SDK client given the same folder writes
// (dir/naming, dir/config), the same for the same servers in any order
// (the next start finds it), another for other servers.
func TestOptions_OwnCacheFolder(t *testing.T) {
	dir := t.TempDir()
	folder := func(servers ...string) string {
		p, err := newConfig([]Option{WithServers(servers...), WithCacheDir(dir)}).params()
		require.NoError(t, err)
		return p.ClientConfig.CacheDir
	}
	own := folder("10.0.0.1:8848", "10.0.0.2:8848")
	assert.Equal(t, dir, filepath.Dir(own), "inside the cache folder")
	assert.True(t, strings.HasPrefix(filepath.Base(own), "graylb-"), own)
	assert.NotContains(t, []string{dir, filepath.Join(dir, "naming"), filepath.Join(dir, "config")}, own)
	assert.Equal(t, own, folder("10.0.0.2:8848", "10.0.0.1:8848"), "stable for the same servers")
	assert.NotEqual(t, own, folder("10.0.0.3:8848"), "other servers, another folder")
	def, err := newConfig(nil).params()
	require.NoError(t, err)
	assert.Equal(t, defaultDir("cache"), filepath.Dir(def.ClientConfig.CacheDir))
}

func TestRegister_BadInput(t *testing.T) {
	_, err := Register(context.Background(), Service{Name: "svc", Host: "", Port: 1})
	require.ErrorIs(t, err, graylb.ErrInvalidInstance)
	_, err = Register(context.Background(), Service{Name: "svc", Host: "h", Port: 1}, WithServers("bad"))
	require.ErrorIs(t, err, ErrConfig)
}
