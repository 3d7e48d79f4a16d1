package adaptertest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/graylb/graylb/filter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// RecordDriver is what a message adapter's tests give RunRecords: its
// producing side, which writes the routing state of the request being
// served on a record, and its consuming side, which admits a record's
// headers for the record's handler. No broker is needed: the suite hands
// the headers of a produced record to the consuming side itself.
//
// A record reaches no instance a LoadBalancer picks (the broker's
// partitions decide which consumer gets it), so the parts of Run about
// calls (their results, ejection, answers, an instance's death,
// allocations) do not apply to it; its parts about keys do, on the record
// and on the calls its handler makes.
type RecordDriver struct {
	// Name names the adapter in the suite's messages ("kafkagray").
	Name string
	// Options are the LoadBalancer options a program using the adapter
	// gives every LoadBalancer; the suite adds its own after them. The
	// NoOptions subtest gives none.
	Options []graylb.Option
	// Produce returns the headers of a record produced through the
	// adapter's producing side over lb with ctx (the context of the request
	// being served, or of none), headers being those the program set on
	// the record before.
	Produce func(t *testing.T, lb *graylb.LoadBalancer, ctx context.Context, headers []Header) []Header
	// Consume admits a record whose headers are headers through the
	// adapter's consuming side over lb (its records written by producers
	// outside the trust boundary when untrusted) and returns the context
	// the record's handler runs with and the headers the handler sees.
	Consume func(t *testing.T, lb *graylb.LoadBalancer, untrusted bool, ctx context.Context, headers []Header) (context.Context, []Header)
}

// Header is one header of a record. A record may carry a name several
// times, in different letter cases.
type Header struct{ Key, Value string }

// RunRecords runs the parts of the conformance suite that apply to a
// record: the letter case of keys and values, a LoadBalancer with no
// option, renamed keys, match rules and their lanes, the trust boundary of
// a consumed record, and what a record produced outside any request
// carries. Each part checks the routing of the calls the record's handler
// makes (LoadBalancer.Pick with its context: every client adapter reads
// the same state) and the record the handler produces in turn, the next
// hop of a record.
func RunRecords(t *testing.T, d RecordDriver) {
	t.Helper()
	if d.Produce == nil || d.Consume == nil {
		t.Fatal("adaptertest: the RecordDriver needs Produce and Consume")
	}
	t.Run("KeyCase", func(t *testing.T) { recordKeyCase(t, &d) })
	t.Run("NoOptions", func(t *testing.T) { recordNoOptions(t, &d) })
	t.Run("RenamedKeys", func(t *testing.T) { recordRenamedKeys(t, &d) })
	t.Run("MatchKeysAndLanes", func(t *testing.T) { recordMatchKeysAndLanes(t, &d) })
	t.Run("TrustBoundary", func(t *testing.T) { recordTrustBoundary(t, &d) })
	t.Run("OutsideARequest", func(t *testing.T) { recordOutsideARequest(t, &d) })
}

// records is one subtest's services: instances registered under ids, a
// record's handler finding which one a call of its reaches.
type records struct {
	t   *testing.T
	d   *RecordDriver
	reg *graylb.Registry
	ids map[string]string // by address
}

func newRecords(t *testing.T, d *RecordDriver) *records {
	return &records{t: t, d: d, reg: graylb.NewRegistry(), ids: map[string]string{}}
}

// instance registers the instance id of svc with md.
func (r *records) instance(id string, md map[string]string) {
	r.t.Helper()
	in := graylb.NewInstance("svc", fmt.Sprintf("10.0.0.%d", len(r.ids)+1), 8080, md)
	require.NoError(r.t, r.reg.Register(in))
	r.ids[in.Addr()] = id
}

// lb returns a LoadBalancer over the registry with the driver's options,
// then opts; bare, with opts alone.
func (r *records) lb(opts ...graylb.Option) *graylb.LoadBalancer {
	return r.bare(append(append([]graylb.Option(nil), r.d.Options...), opts...)...)
}

func (r *records) bare(opts ...graylb.Option) *graylb.LoadBalancer {
	lb, err := graylb.New(r.reg, opts...)
	require.NoError(r.t, err)
	r.t.Cleanup(func() { lb.Close() })
	return lb
}

// hop is what one consumed record did: which instance its handler's call
// reached, the headers its handler saw, and those of the record its
// handler produced.
type hop struct {
	reached string
	seen    []Header
	next    []Header
}

// consume hands a record with headers to lb's consuming side (untrusted
// as said) and runs its handler: a call of svc and a record produced.
func (r *records) consume(lb *graylb.LoadBalancer, untrusted bool, headers []Header) hop {
	r.t.Helper()
	ctx, seen := r.d.Consume(r.t, lb, untrusted, context.Background(), headers)
	return hop{reached: r.pick(lb, ctx), seen: seen, next: r.d.Produce(r.t, lb, ctx, nil)}
}

func (r *records) pick(lb *graylb.LoadBalancer, ctx context.Context) string {
	r.t.Helper()
	in, err := lb.Pick(ctx, "svc")
	require.NoError(r.t, err)
	return r.ids[in.Addr()]
}

// served returns the context of a request admitted with keys by a
// trusted server side over lb (package adapter's Admitter, which every
// server adapter uses): a producer's request.
func served(lb *graylb.LoadBalancer, keys map[string]string) context.Context {
	c := headerCarrier{}
	for k, v := range keys {
		c.add(k, v)
	}
	return adapter.For(lb).Admitter().Admit(context.Background(), &c, adapter.Admission{})
}

// headersOf returns keys as a record's headers, in a fixed order.
func headersOf(keys map[string]string) []Header {
	var out []Header
	for k, v := range keys {
		out = append(out, Header{k, v})
	}
	// A fixed order: the suite's messages stay comparable.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Key < out[j-1].Key; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// value returns the first value of name in hs, in any letter case, and
// how many headers carry the name.
func value(hs []Header, name string) (string, int) {
	v, n := "", 0
	for _, h := range hs {
		if strings.EqualFold(h.Key, name) {
			if n == 0 {
				v = h.Value
			}
			n++
		}
	}
	return v, n
}

// headerCarrier is a record's headers as an adapter.Carrier.
type headerCarrier []Header

func (c *headerCarrier) add(k, v string) { *c = append(*c, Header{k, v}) }

func (c *headerCarrier) Get(name string) string { v, _ := value(*c, name); return v }

func (c *headerCarrier) Set(name, v string) { c.Delete(name); c.add(name, v) }

func (c *headerCarrier) Delete(name string) {
	kept := (*c)[:0]
	for _, h := range *c {
		if !strings.EqualFold(h.Key, name) {
			kept = append(kept, h)
		}
	}
	*c = kept
}

// recordKeyCase: key names are case-insensitive on a record, and the gray
// value "true" is gray in any letter case while nothing else is (nothing
// is trimmed): the consumed record's handler routes by it, and the record
// it produces carries the decided kind in its canonical spelling, under
// the LoadBalancer's name; a record nothing classified carries no gray
// key. A graylb.WithValue the program set classifies a produced record.
func recordKeyCase(t *testing.T, d *RecordDriver) {
	r := newRecords(t, d)
	lb := r.lb(graylb.WithRules(graylb.Rules{Matches: []graylb.Match{{Key: "X-Region", Exact: "hz", Gray: true}}}))
	r.instance("prod-1", nil)
	r.instance("gray-1", map[string]string{"gray": "TRUE"})
	for _, c := range []struct {
		keys map[string]string
		gray bool
		next string // the produced record's gray value ("" none)
	}{
		{map[string]string{"gray": "true"}, true, "true"},
		{map[string]string{"GRAY": "TRUE"}, true, "true"},
		{map[string]string{"Gray": "true"}, true, "true"},
		{map[string]string{"gRaY": "tRuE"}, true, "true"},
		{map[string]string{"x-region": "hz"}, true, "true"},
		{map[string]string{"X-REGION": "hz"}, true, "true"},
		{map[string]string{"gray": "false"}, false, "false"},
		{map[string]string{"GRAY": "FALSE"}, false, "false"},
		{map[string]string{"gray": "yes"}, false, "false"},
		{map[string]string{"gray": "1"}, false, "false"},
		{map[string]string{"gray": " true"}, false, "false"},
		{map[string]string{"gray": "true "}, false, "false"},
		{map[string]string{"gray": ""}, false, ""},
		{nil, false, ""},
	} {
		h := r.consume(lb, false, headersOf(c.keys))
		assert.Equal(t, c.gray, isGray(h.reached), "%s: the handler of a record with %v reached %s", d.Name, c.keys, h.reached)
		v, n := value(h.next, "gray")
		assert.Equal(t, c.next, v, "%s: a record with %v: the gray value of the record its handler produced", d.Name, c.keys)
		if c.next != "" {
			assert.Equal(t, 1, n, "%s: a record with %v: the record its handler produced carries the gray key %d times", d.Name, c.keys, n)
		}
	}
	for _, name := range []string{"gray", "GRAY", "Gray"} {
		ctx := graylb.WithValue(context.Background(), name, "TRUE")
		v, _ := value(d.Produce(t, lb, ctx, nil), "gray")
		assert.Equal(t, "true", v, "%s: a record produced with graylb.WithValue(%q, TRUE)", d.Name, name)
		next := r.consume(lb, false, d.Produce(t, lb, ctx, nil))
		assert.True(t, isGray(next.reached), "%s: the handler of a record produced with graylb.WithValue(%q, TRUE) reached %s", d.Name, name, next.reached)
	}
}

// recordNoOptions: a LoadBalancer made with no option at all routes a
// consumed record's calls by the record's keys, and rules set at run time
// (gray users) read the user key there too; the user key and the kind a
// rule decided travel on the record the handler produces.
func recordNoOptions(t *testing.T, d *RecordDriver) {
	r := newRecords(t, d)
	lb := r.bare()
	r.instance("prod-1", nil)
	r.instance("gray-1", map[string]string{"gray": "true"})
	check := func(keys map[string]string, gray bool) {
		t.Helper()
		h := r.consume(lb, false, headersOf(keys))
		assert.Equal(t, gray, isGray(h.reached), "%s: the handler of a record with %v reached %s", d.Name, keys, h.reached)
	}
	check(grayKeys, true)
	check(map[string]string{"gray": "false"}, false)
	check(nil, false)
	require.NoError(t, lb.SetRules(graylb.Rules{GrayUsers: []string{"alice"}}))
	check(map[string]string{"uid": "alice"}, true)
	check(map[string]string{"uid": "bob"}, false)
	h := r.consume(lb, false, headersOf(map[string]string{"uid": "alice"}))
	u, _ := value(h.next, "uid")
	g, _ := value(h.next, "gray")
	assert.Equal(t, "alice", u, "%s: the user key is passed on to the next record", d.Name)
	assert.Equal(t, "true", g, "%s: the kind a gray user decided is written on the next record", d.Name)
}

// recordRenamedKeys: the keys are the LoadBalancer's (WithGrayHeader,
// WithUserHeader, a VersionFilter's WithVersionHeader): the renamed ones
// route a consumed record's calls and are passed on to the record its
// handler produces, the default names mean nothing, and a kind a rule
// decided is written under the renamed gray key.
func recordRenamedKeys(t *testing.T, d *RecordDriver) {
	r := newRecords(t, d)
	lb := r.lb(graylb.WithGrayHeader("x-gray-tag"), graylb.WithGrayKey("gray-tag"), graylb.WithUserHeader("x-user-id"),
		graylb.WithFilters(filter.Version(filter.WithVersionHeader("x-ver"))),
		graylb.WithRules(graylb.Rules{GrayUsers: []string{"alice"}}))
	r.instance("prod-old", map[string]string{"gray": "true"}) // gray by the default key only: prod
	r.instance("prod-v1", map[string]string{"version": "v1"})
	r.instance("prod-v2", map[string]string{"version": "v2"})
	r.instance("gray-1", map[string]string{"gray-tag": "true"})
	for _, c := range []struct {
		keys map[string]string
		want string
	}{
		{map[string]string{"x-gray-tag": "true"}, "gray-1"},
		{map[string]string{"X-Gray-Tag": "TRUE"}, "gray-1"},
		{grayKeys, "prod-old"},
		{map[string]string{"x-user-id": "alice"}, "gray-1"},
		{map[string]string{"uid": "alice"}, "prod-old"},
		{map[string]string{"x-ver": "v1"}, "prod-v1"},
		{map[string]string{"X-Ver": "v2"}, "prod-v2"},
		{map[string]string{"version": "v2"}, "prod-old"},
	} {
		h := r.consume(lb, false, headersOf(c.keys))
		assert.Equal(t, c.want, h.reached, "%s: the handler of a record with %v", d.Name, c.keys)
		_, n := value(h.next, "gray")
		assert.Zero(t, n, "%s: a record with %v: the record its handler produced carries the default gray key", d.Name, c.keys)
	}
	h := r.consume(lb, false, headersOf(map[string]string{"x-ver": "v2"}))
	v, _ := value(h.next, "x-ver")
	assert.Equal(t, "v2", v, "%s: the renamed version key is passed on", d.Name)
	h = r.consume(lb, false, headersOf(map[string]string{"x-user-id": "alice"}))
	u, _ := value(h.next, "x-user-id")
	g, _ := value(h.next, "x-gray-tag")
	assert.Equal(t, "alice", u, "%s: the renamed user key is passed on", d.Name)
	assert.Equal(t, "true", g, "%s: the kind a gray user decided is written under the renamed gray key", d.Name)
}

// recordMatchKeysAndLanes: match rules make a request gray or give it a
// lane by any key, in any letter case, only when nobody chose its side; a
// record produced while serving such a request carries the match key, the
// decided kind under the gray key and the lane under the version key, so
// the record's handler routes the same way, and passes them on.
func recordMatchKeysAndLanes(t *testing.T, d *RecordDriver) {
	r := newRecords(t, d)
	lb := r.lb(graylb.WithFilters(filter.Version()), graylb.WithRules(graylb.Rules{Matches: []graylb.Match{
		{Key: "x-region", Exact: "hz", Gray: true},
		{Key: "X-Lane", Exact: "feat-42", Version: "feat-42"},
		{Key: "x-tenant", Prefix: "beta-", Gray: true, Version: "v2"},
	}}))
	r.instance("prod-1", nil)
	r.instance("prod-lane", map[string]string{"version": "feat-42"})
	r.instance("gray-1", map[string]string{"gray": "true"})
	r.instance("gray-v2", map[string]string{"gray": "true", "version": "v2"})
	for _, c := range []struct {
		keys          map[string]string
		want          string
		gray, version string // what the produced record carries
	}{
		{map[string]string{"x-region": "hz"}, "gray-1", "true", ""},
		{map[string]string{"X-REGION": "hz"}, "gray-1", "true", ""},
		{map[string]string{"x-region": "sh"}, "prod-1", "", ""},
		{map[string]string{"x-region": "hz", "gray": "false"}, "prod-1", "false", ""},
		{map[string]string{"x-lane": "feat-42"}, "prod-lane", "false", "feat-42"},
		{map[string]string{"X-Lane": "feat-42"}, "prod-lane", "false", "feat-42"},
		{map[string]string{"x-lane": "feat-42", "version": "v9"}, "prod-1", "false", "v9"},
		{map[string]string{"x-tenant": "beta-7"}, "gray-v2", "true", "v2"},
		{nil, "prod-1", "", ""},
	} {
		// A request admitted with the keys produces a record: its consumer
		// routes as the request did.
		rec := d.Produce(t, lb, served(lb, c.keys), nil)
		g, _ := value(rec, "gray")
		v, _ := value(rec, "version")
		assert.Equal(t, c.gray, g, "%s: a request with %v produced a record whose gray value", d.Name, c.keys)
		assert.Equal(t, c.version, v, "%s: a request with %v produced a record whose version", d.Name, c.keys)
		for k, want := range c.keys {
			got, _ := value(rec, k)
			assert.Equal(t, want, got, "%s: a request with %v produced a record: the key %s", d.Name, c.keys, k)
		}
		h := r.consume(lb, false, rec)
		assert.Equal(t, c.want, h.reached, "%s: the handler of a record a request with %v produced", d.Name, c.keys)
		// The record's own keys route its handler alike.
		h = r.consume(lb, false, headersOf(c.keys))
		assert.Equal(t, c.want, h.reached, "%s: the handler of a record with %v", d.Name, c.keys)
	}
}

// recordTrustBoundary: a consumer of records written outside the trust
// boundary keeps no routing key of theirs (gray, user, version, the keys
// the match rules in force name), in any letter case and repeated: its
// handler's calls are prod, its handler sees none of them, and the record
// it produces carries none but the kind it settled ("false"). A trusted
// consumer's records route and pass their keys on.
func recordTrustBoundary(t *testing.T, d *RecordDriver) {
	r := newRecords(t, d)
	lb := r.lb(graylb.WithFilters(filter.Version()), graylb.WithRules(graylb.Rules{
		GrayUsers: []string{"alice"},
		Matches:   []graylb.Match{{Key: "x-region", Exact: "hz", Gray: true}, {Key: "x-lane", Exact: "feat-42", Version: "feat-42"}},
	}))
	r.instance("prod-1", nil)
	r.instance("prod-v2", map[string]string{"version": "v2"})
	r.instance("prod-lane", map[string]string{"version": "feat-42"})
	r.instance("gray-1", map[string]string{"gray": "true"})
	routing := []string{"gray", "uid", "version", "x-region", "x-lane"}
	for _, forged := range [][]Header{
		{{"gray", "true"}}, {{"GRAY", "TRUE"}}, {{"Gray", "true"}, {"gray", "true"}, {"GRAY", "True"}},
		{{"uid", "alice"}}, {{"UID", "alice"}},
		{{"version", "v2"}}, {{"Version", "v2"}},
		{{"x-region", "hz"}}, {{"X-REGION", "hz"}},
		{{"x-lane", "feat-42"}}, {{"X-Lane", "feat-42"}},
		{{"gray", "true"}, {"uid", "alice"}, {"version", "v2"}, {"x-region", "hz"}, {"x-lane", "feat-42"}, {"other", "x"}},
	} {
		h := r.consume(lb, true, forged)
		assert.Equal(t, "prod-1", h.reached, "%s: an untrusted record's %v routed its handler's call", d.Name, forged)
		g, n := value(h.next, "gray")
		assert.Equal(t, "false", g, "%s: an untrusted record's %v: the gray value of the record its handler produced", d.Name, forged)
		assert.Equal(t, 1, n, "%s: an untrusted record's %v: the record its handler produced carries the gray key %d times", d.Name, forged, n)
		for _, k := range routing {
			_, n := value(h.seen, k)
			assert.Zero(t, n, "%s: an untrusted record's %v: its handler saw %s", d.Name, forged, k)
			if k != "gray" {
				_, n = value(h.next, k)
				assert.Zero(t, n, "%s: an untrusted record's %v: %s was passed on", d.Name, forged, k)
			}
		}
		if _, n := value(forged, "other"); n > 0 {
			v, _ := value(h.seen, "other")
			assert.Equal(t, "x", v, "%s: an untrusted record's other headers stay", d.Name)
		}
	}
	for _, c := range []struct {
		keys map[string]string
		want string
	}{
		{grayKeys, "gray-1"},
		{map[string]string{"uid": "alice"}, "gray-1"},
		{map[string]string{"version": "v2"}, "prod-v2"},
		{map[string]string{"x-region": "hz"}, "gray-1"},
		{map[string]string{"x-lane": "feat-42"}, "prod-lane"},
	} {
		h := r.consume(lb, false, headersOf(c.keys))
		assert.Equal(t, c.want, h.reached, "%s: the handler of a trusted record with %v", d.Name, c.keys)
		for k, want := range c.keys {
			got, _ := value(h.next, k)
			assert.Equal(t, want, got, "%s: a trusted record with %v: %s is passed on", d.Name, c.keys, k)
		}
	}
}

// recordOutsideARequest: a record produced outside any request, that
// nothing classified, carries no gray key (absent means prod, as for a
// request), unless the producer's own flag (graylb.WithSelfGray) says
// gray; a gray key the program set on the record stays, once.
func recordOutsideARequest(t *testing.T, d *RecordDriver) {
	r := newRecords(t, d)
	r.instance("prod-1", nil)
	r.instance("gray-1", map[string]string{"gray": "true"})
	lb := r.lb()
	rec := d.Produce(t, lb, context.Background(), nil)
	_, n := value(rec, "gray")
	assert.Zero(t, n, "%s: a record produced outside any request carries a gray key: %v", d.Name, rec)
	assert.Equal(t, "prod-1", r.consume(lb, false, rec).reached, "%s: the handler of a record produced outside any request", d.Name)
	rec = d.Produce(t, lb, context.Background(), []Header{{"gray", "true"}})
	v, n := value(rec, "gray")
	assert.Equal(t, "true", v, "%s: a record's own gray key", d.Name)
	assert.Equal(t, 1, n, "%s: a record's own gray key, %d times", d.Name, n)
	self := r.lb(graylb.WithSelfGray(true))
	v, _ = value(d.Produce(t, self, context.Background(), nil), "gray")
	assert.Equal(t, "true", v, "%s: a gray producer's record outside any request", d.Name)
}
