package kafkagray_test

import (
	"context"
	"errors"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/kafkagray"
	"github.com/twmb/franz-go/pkg/kgo"
)

// newLB returns a LoadBalancer over one prod and one gray instance of
// "svc" (10.0.0.1 prod, 10.0.0.2 gray).
func newLB(t testing.TB, opts ...graylb.Option) *graylb.LoadBalancer {
	t.Helper()
	reg := graylb.NewRegistry()
	if err := reg.Register(graylb.NewInstance("svc", "10.0.0.1", 80, nil)); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(graylb.NewInstance("svc", "10.0.0.2", 80, map[string]string{"gray": "true"})); err != nil {
		t.Fatal(err)
	}
	lb, err := graylb.New(reg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lb.Close() })
	return lb
}

func newLink(t testing.TB, lb *graylb.LoadBalancer, opts ...kafkagray.Option) *kafkagray.Link {
	t.Helper()
	l, err := kafkagray.New(lb, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func header(r *kgo.Record, name string) (string, int) {
	v, n := "", 0
	for _, h := range r.Headers {
		if h.Key == name {
			v, n = string(h.Value), n+1
		}
	}
	return v, n
}

func record(kv ...string) *kgo.Record {
	r := &kgo.Record{Topic: "t", Value: []byte("v")}
	for i := 0; i+1 < len(kv); i += 2 {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: kv[i], Value: []byte(kv[i+1])})
	}
	return r
}

func TestNew_NoLoadBalancer(t *testing.T) {
	if _, err := kafkagray.New(nil); !errors.Is(err, kafkagray.ErrNoLoadBalancer) {
		t.Fatalf("New(nil) = %v, want ErrNoLoadBalancer", err)
	}
}

// A record produced while a consumed gray record is handled carries the
// request's keys: gray, user and version, once each.
func TestStamp_KeepsTheRequestsKeys(t *testing.T) {
	l := newLink(t, newLB(t))
	ctx := l.Context(context.Background(), record("Gray", "true", "uid", "u1", "version", "v2"))
	out := record()
	l.Stamp(ctx, out)
	for name, want := range map[string]string{"gray": "true", "uid": "u1", "version": "v2"} {
		if v, n := header(out, name); v != want || n != 1 {
			t.Errorf("header %s = %q (%d times), want %q once", name, v, n, want)
		}
	}
}

// A record produced outside any request is prod: it carries no gray key
// (absent means prod, as for a request), goes to a prod partition, and its
// consumer's calls are prod.
func TestStamp_OutsideARequestIsProd(t *testing.T) {
	lb := newLB(t)
	l := newLink(t, lb)
	out := record()
	l.Stamp(context.Background(), out)
	if v, _ := header(out, "gray"); v == "true" {
		t.Fatalf("gray header = %q, want none or false", v)
	}
	if p := l.Partitioner().ForTopic("t").Partition(out, 4); p == 3 {
		t.Fatal("a record produced outside a request went to the gray partition")
	}
	inst, err := lb.Pick(l.Context(context.Background(), out), "svc")
	if err != nil || inst.Host != "10.0.0.1" {
		t.Fatalf("its consumer picked %v, %v: want prod", inst.Host, err)
	}
}

// A gray service's producer makes gray records outside requests.
func TestStamp_GrayProducerOutsideARequest(t *testing.T) {
	l := newLink(t, newLB(t, graylb.WithSelfGray(true)))
	out := record()
	l.Stamp(context.Background(), out)
	if v, _ := header(out, "gray"); v != "true" {
		t.Fatalf("gray header = %q, want true", v)
	}
}

// A record that says its kind keeps it.
func TestStamp_RecordsOwnKeyTravels(t *testing.T) {
	l := newLink(t, newLB(t))
	out := record("gray", "true")
	l.Stamp(context.Background(), out)
	if v, n := header(out, "gray"); v != "true" || n != 1 {
		t.Fatalf("gray header = %q (%d times), want \"true\" once", v, n)
	}
}

// The handler's context routes as the record says: a pick made with it
// reaches the gray instance for a gray record and the prod one otherwise.
func TestContext_HandlerKeepsTheRecordsKind(t *testing.T) {
	lb := newLB(t)
	l := newLink(t, lb)
	for _, tc := range []struct {
		rec  *kgo.Record
		want string
	}{
		{record("gray", "true"), "10.0.0.2"},
		{record("GRAY", "True"), "10.0.0.2"},
		{record("gray", "false"), "10.0.0.1"},
		{record(), "10.0.0.1"},
	} {
		inst, err := lb.Pick(l.Context(context.Background(), tc.rec), "svc")
		if err != nil {
			t.Fatal(err)
		}
		if inst.Host != tc.want {
			t.Errorf("record %v: picked %s, want %s", tc.rec.Headers, inst.Host, tc.want)
		}
	}
}

// An untrusted topic's routing keys are dropped, in any letter case: the
// record is prod, and its headers no longer carry them.
func TestContext_UntrustedDropsEveryRoutingKey(t *testing.T) {
	lb := newLB(t)
	l := newLink(t, lb, kafkagray.Untrusted())
	r := record("Gray", "true", "gray", "true", "UID", "u1", "other", "x")
	ctx := l.Context(context.Background(), r)
	inst, err := lb.Pick(ctx, "svc")
	if err != nil {
		t.Fatal(err)
	}
	if inst.Host != "10.0.0.1" {
		t.Fatalf("untrusted gray record picked %s, want prod", inst.Host)
	}
	if len(r.Headers) != 1 || r.Headers[0].Key != "other" {
		t.Fatalf("headers left %v, want only other", r.Headers)
	}
	out := record()
	l.Stamp(ctx, out)
	if v, _ := header(out, "gray"); v != "false" {
		t.Fatalf("the next hop of an untrusted record got gray %q, want false", v)
	}
}
