package adaptertest

import (
	"context"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/graylb/graylb"
	"github.com/stretchr/testify/require"
)

// callTimeout bounds every call the suite makes that should be answered.
const callTimeout = 5 * time.Second

var grayKeys = map[string]string{"gray": "true"}

// env is one subtest's registry and driver.
type env struct {
	t   *testing.T
	d   *Driver
	reg *graylb.Registry
}

func newEnv(t *testing.T, d *Driver) *env { return &env{t: t, d: d, reg: graylb.NewRegistry()} }

// lb returns a LoadBalancer over the registry with the driver's options,
// then opts; closed when the test ends.
func (e *env) lb(opts ...graylb.Option) *graylb.LoadBalancer {
	return e.bare(append(append([]graylb.Option(nil), e.d.Options...), opts...)...)
}

// bare returns a LoadBalancer over the registry with opts alone.
func (e *env) bare(opts ...graylb.Option) *graylb.LoadBalancer {
	lb, err := graylb.New(e.reg, opts...)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { lb.Close() })
	return lb
}

// instance is a running, registered instance.
type instance struct {
	id   string
	inst graylb.Instance
	l    *Listener
}

// serve starts the instance id of service, its server side over lb,
// and registers it with md.
func (e *env) serve(lb *graylb.LoadBalancer, service, id string, md map[string]string, o ServerOptions) *instance {
	e.t.Helper()
	l := Listen(e.t)
	o.ID = id
	e.d.Serve(e.t, lb, l, o)
	in := graylb.NewInstance(service, "127.0.0.1", l.Port(), md)
	require.NoError(e.t, e.reg.Register(in))
	return &instance{id: id, inst: in, l: l}
}

func (e *env) dial(lb *graylb.LoadBalancer, service string) Client {
	e.t.Helper()
	return e.d.Dial(e.t, e.reg, lb, service)
}

func call(c Client, keys map[string]string) (Answer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return c(ctx, keys)
}

// answer makes a call that must succeed.
func answer(t *testing.T, c Client, keys map[string]string) Answer {
	t.Helper()
	a, err := call(c, keys)
	require.NoError(t, err, "a call with %v", keys)
	return a
}

// ready waits until every instance in ids answered (anywhere in a chain) a
// call with keys: gRPC connections turn ready one by one, and until an
// instance's does, no call reaches it.
func ready(t *testing.T, c Client, keys map[string]string, ids ...string) {
	t.Helper()
	seen := map[string]bool{}
	deadline := time.Now().Add(10 * time.Second)
	var last string
	for {
		a, err := call(c, keys)
		if err != nil {
			last = err.Error()
		} else {
			last = path(a)
			for n := &a; n != nil; n = n.Next {
				seen[n.Instance] = true
			}
		}
		missing := false
		for _, id := range ids {
			missing = missing || !seen[id]
		}
		if !missing {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("calls with %v did not reach %v within 10s; the last: %s", keys, ids, last)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// path returns the instances a chain of answers went through: edge>gray-1.
func path(a Answer) string {
	var b strings.Builder
	for n := &a; n != nil; n = n.Next {
		if n != &a {
			b.WriteString(">")
		}
		b.WriteString(n.Instance)
		if n.NextErr != "" {
			b.WriteString(">error: " + n.NextErr)
		}
	}
	return b.String()
}

func isGray(id string) bool { return strings.HasPrefix(id, "gray") }

func kindOf(id string) string {
	if isGray(id) {
		return graylb.Gray.String()
	}
	return graylb.Prod.String()
}

func addrOf(list []*instance, id string) string {
	for _, in := range list {
		if in.id == id {
			return in.inst.Addr()
		}
	}
	return "unknown instance " + id
}

// observer is a CallObserver that counts what it is told, by
// "addr kind ok|error", and keeps the durations it is told.
type observer struct {
	mu   sync.Mutex
	m    map[string]int
	n    int
	took []time.Duration
}

func (o *observer) observe(_ string, inst graylb.Instance, kind graylb.Kind, ok bool, took time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[string]int{}
	}
	res := "ok"
	if !ok {
		res = "error"
	}
	o.m[inst.Addr()+" "+kind.String()+" "+res]++
	o.n++
	o.took = append(o.took, took)
}

// durations returns the durations told since the last reset.
func (o *observer) durations() []time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]time.Duration(nil), o.took...)
}

// count returns how many calls were told since the last reset.
func (o *observer) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n
}

func (o *observer) reset() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.m, o.n, o.took = map[string]int{}, 0, nil
}

func (o *observer) seen() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	m := make(map[string]int, len(o.m))
	for k, v := range o.m {
		m[k] = v
	}
	return m
}

// wait waits until n calls were told (an adapter may tell a call after
// its caller had the answer), then a little longer for any extra one.
func (o *observer) wait(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		o.mu.Lock()
		got := o.n
		o.mu.Unlock()
		if got >= n {
			break
		}
		if time.Now().After(deadline) {
			keys := make([]string, 0)
			for k := range o.seen() {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			t.Errorf("%d calls told to the CallObserver within 1s, not %d: %v", got, n, keys)
			return
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
}
