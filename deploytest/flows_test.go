package deploytest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// flow is one deployment flow's world: the Nacos server, the deployed
// service (HTTP and gRPC), its caller, and a steady load.
type flow struct {
	t    *testing.T
	addr string
	svc  string
	c    *caller
}

func newFlow(t *testing.T, rulesDataID string) *flow {
	addr := nacosAddr(t)
	svc := uniqueName(t)
	return &flow{t: t, addr: addr, svc: svc, c: newCaller(t, addr, svc, rulesDataID)}
}

func (f *flow) start(name string, gray bool) *instance {
	f.t.Helper()
	return startInstance(f.t, f.addr, f.svc, name, gray)
}

// ready waits until every instance has answered over every protocol.
func (f *flow) ready(ins ...*instance) {
	f.t.Helper()
	for _, in := range ins {
		f.c.waitServed(f.t, in, 15*time.Second)
	}
}

// checkKinds asserts what holds in every flow: no prod request reached a
// gray instance.
func checkKinds(t *testing.T, tl tally) {
	t.Helper()
	assert.Zero(t, sum(tl.prodOnGray), "prod requests answered by a gray instance")
}

// (a) A gray instance stops gracefully (deregister, drain wait, stop)
// while another gray instance serves on: no request fails, none of the
// wrong kind.
func TestDeploy_GracefulStopOfAGrayInstance(t *testing.T) {
	f := newFlow(t, "")
	p1, p2 := f.start("prod-1", false), f.start("prod-2", false)
	g1, g2 := f.start("gray-1", true), f.start("gray-2", true)
	f.ready(p1, p2, g1, g2)
	l := startLoad(f.c, reqHTTP, reqUnary, reqStream)
	l.settle(t)
	st := g2.stopGracefully()
	l.settle(t)
	tl := count(l.finish())

	offHTTP, offGRPC := since(st.begin, g2.lastServed(protoHTTP)), since(st.begin, g2.lastServed(protoGRPC))
	reliabilityFragment(t, "deploy-a-graceful", fmt.Sprintf(
		"| graceful stop of a gray instance (deregister, drain wait, stop) | 2 prod, 2 gray | %s | %d | %d | %d | the stopped instance's last request %s (HTTP) / %s (gRPC) after its deregistration; Deregister returned after %s |\n",
		tl.requests(), sum(tl.failed), sum(tl.prodOnGray), sum(tl.grayOnProd), ms(offHTTP), ms(offGRPC), ms(st.deregistered.Sub(st.begin))))
	require.NoError(t, st.err)
	assert.Zero(t, sum(tl.failed), "failed requests: %s", tl.failures())
	checkKinds(t, tl)
	assert.Zero(t, sum(tl.grayOnProd), "gray requests answered by prod while gray-1 serves")
}

// (b) The only gray instance stops abruptly (kill -9: its connections
// refused, its Nacos connection gone without a deregistration) while the
// registry still lists it. Idempotent gray requests should fall back to
// prod; the others fail fast with an error that says why.
func TestDeploy_AbruptStopOfTheOnlyGrayInstance(t *testing.T) {
	f := newFlow(t, "")
	p1, p2 := f.start("prod-1", false), f.start("prod-2", false)
	g1 := f.start("gray-1", true)
	f.ready(p1, p2, g1)
	l := startLoad(f.c, reqHTTP, reqPOST, reqUnary, reqStream)
	l.settle(t)
	killed := time.Now()
	g1.kill()
	// Until gray requests are answered by prod again over every protocol
	// (the registry dropped it, or the fallback took them), then settle.
	for _, req := range []int{reqHTTP, reqUnary, reqStream} {
		l.waitFor(t, 15*time.Second, reqNames[req]+" gray request answered by prod after the kill", func(r record) bool {
			return r.req == req && r.gray && r.err == nil && r.start.After(killed) && !r.answeredByGray()
		})
	}
	l.settle(t)
	recs := l.finish()
	tl := count(recs)

	idempotent := tl.failed[reqHTTP] + tl.failed[reqUnary] + tl.failed[reqStream]
	var lastFailed time.Time
	for _, r := range recs {
		if r.err != nil && r.start.After(lastFailed) {
			lastFailed = r.start
		}
	}
	row := fmt.Sprintf(
		"| abrupt stop (kill -9) of the only gray instance, still listed until the registry drops it | 2 prod, 1 gray | %s | %d idempotent (GET, gRPC), %d POST | %d | %d | requests failed until %s after the kill |\n",
		tl.requests(), idempotent, tl.failed[reqPOST], sum(tl.prodOnGray), sum(tl.grayOnProd), ms(since(killed, lastFailed)))
	reliabilityFragment(t, "deploy-b-abrupt", row)
	t.Logf("failures: %s", tl.failures())
	checkKinds(t, tl)
	assert.Zero(t, idempotent, "idempotent requests failed: %s", tl.failures())
	// Each failed POST says why: one sent after the kill could not connect;
	// one in flight at the kill lost its connection, and is not sent again.
	for _, r := range recs {
		if r.req == reqPOST && r.err != nil {
			msg := strings.ToLower(r.err.Error())
			if !strings.Contains(msg, "refused") && !strings.Contains(msg, "not idempotent") {
				assert.Fail(t, "a POST that cannot reach the gray instance does not say why", "%s", r.err)
			}
		}
	}
}

// rollingStep is one step of a rolling restart, as measured.
type rollingStep struct {
	stop            stopTimes
	registered      time.Time
	oldOff, newOn   [2]time.Duration // per protocol: the old one's last request after its stop began; the new one's first after it registered
	replaced, added *instance
}

// rollingRestart replaces each of olds by a new instance, one at a time,
// as a rolling update with one extra instance does: the new one starts and
// registers, then the old one stops gracefully. between runs in each step
// between the two.
func rollingRestart(f *flow, olds []*instance, between func(step int)) []rollingStep {
	steps := make([]rollingStep, len(olds))
	for i, old := range olds {
		s := &steps[i]
		s.replaced = old
		s.added = f.start(old.name+"-v2", false)
		s.registered = time.Now()
		if between != nil {
			between(i)
		}
		s.stop = old.stopGracefully()
	}
	return steps
}

// waitNewServed waits until every new instance of the steps has answered
// a request of the load over every protocol.
func waitNewServed(t *testing.T, l *load, steps []rollingStep) {
	t.Helper()
	for _, s := range steps {
		for _, req := range []int{reqHTTP, reqUnary, reqStream} {
			l.waitFor(t, 15*time.Second, reqNames[req]+" answered by "+s.added.name, func(r record) bool {
				return r.req == req && r.err == nil && r.from(s.added.name)
			})
		}
	}
}

// measure fills the steps' figures once the load is over.
func measure(steps []rollingStep) {
	for i := range steps {
		s := &steps[i]
		for p := range 2 {
			s.oldOff[p] = since(s.stop.begin, s.replaced.lastServed(p))
			s.newOn[p] = since(s.registered, s.added.firstServed(p))
		}
	}
}

// maxOf is the largest of the steps' figures for protocol p.
func maxOf(steps []rollingStep, p int, f func(rollingStep) [2]time.Duration) time.Duration {
	m := time.Duration(-1)
	for _, s := range steps {
		m = max(m, f(s)[p])
	}
	return m
}

func rollingFigures(steps []rollingStep) string {
	off := func(s rollingStep) [2]time.Duration { return s.oldOff }
	on := func(s rollingStep) [2]time.Duration { return s.newOn }
	return fmt.Sprintf("a stopped instance's last request at most %s (HTTP) / %s (gRPC) after its deregistration; a new one's first request at most %s / %s after it registered",
		ms(maxOf(steps, protoHTTP, off)), ms(maxOf(steps, protoGRPC, off)), ms(maxOf(steps, protoHTTP, on)), ms(maxOf(steps, protoGRPC, on)))
}

// (c) The three prod instances restart one at a time, gracefully: no
// request fails, none of the wrong kind.
func TestDeploy_RollingRestartOfProd(t *testing.T) {
	f := newFlow(t, "")
	olds := []*instance{f.start("prod-1", false), f.start("prod-2", false), f.start("prod-3", false)}
	g1 := f.start("gray-1", true)
	f.ready(append(olds, g1)...)
	l := startLoad(f.c, reqHTTP, reqUnary, reqStream)
	l.settle(t)
	steps := rollingRestart(f, olds, nil)
	waitNewServed(t, l, steps)
	l.settle(t)
	tl := count(l.finish())
	measure(steps)

	reliabilityFragment(t, "deploy-c-rolling", fmt.Sprintf(
		"| rolling restart of 3 prod instances, one at a time (new one registered, then the old one stopped gracefully) | 3 prod, 1 gray | %s | %d | %d | %d | %s |\n",
		tl.requests(), sum(tl.failed), sum(tl.prodOnGray), sum(tl.grayOnProd), rollingFigures(steps)))
	for _, s := range steps {
		require.NoError(t, s.stop.err, "deregistering %s", s.replaced.name)
	}
	assert.Zero(t, sum(tl.failed), "failed requests: %s", tl.failures())
	checkKinds(t, tl)
	assert.Zero(t, sum(tl.grayOnProd), "gray requests answered by prod while gray-1 serves")
}

// (f) The rolling restart of (c) with the Nacos server restarted in its
// second step, once the new instance registered: the old one's graceful
// stop begins while the server is down (its deregistration waits for the
// connection), and completes while every client registers again.
func TestDeploy_RollingRestartThroughANacosRestart(t *testing.T) {
	f := newFlow(t, "")
	ctl := nacosScript(t)
	olds := []*instance{f.start("prod-1", false), f.start("prod-2", false), f.start("prod-3", false)}
	g1 := f.start("gray-1", true)
	f.ready(append(olds, g1)...)
	l := startLoad(f.c, reqHTTP, reqUnary, reqStream)
	l.settle(t)
	var restart sync.WaitGroup
	var down, up time.Time
	var startErr error
	steps := rollingRestart(f, olds, func(step int) {
		if step != 1 {
			return
		}
		down = time.Now()
		require.NoError(t, ctl("stop"))
		restart.Add(1)
		go func() { // the script's start waits until the server answers
			defer restart.Done()
			startErr = ctl("start")
			up = time.Now()
		}()
	})
	restart.Wait()
	require.NoError(t, startErr)
	waitNewServed(t, l, steps)
	l.settle(t)
	tl := count(l.finish())
	measure(steps)

	deregFailed := 0
	for _, s := range steps {
		if s.stop.err != nil {
			deregFailed++
			t.Logf("deregistering %s: %v", s.replaced.name, s.stop.err)
		}
	}
	reliabilityFragment(t, "deploy-f-restart", fmt.Sprintf(
		"| rolling restart of 3 prod instances as above, with Nacos stopped and restarted in its second step: the old instance's graceful stop begins while the server is down (down %s) | 3 prod, 1 gray | %s | %d | %d | %d | %s; %d of %d deregistrations failed |\n",
		ms(up.Sub(down)), tl.requests(), sum(tl.failed), sum(tl.prodOnGray), sum(tl.grayOnProd), rollingFigures(steps), deregFailed, len(steps)))
	assert.Zero(t, sum(tl.failed), "failed requests: %s", tl.failures())
	checkKinds(t, tl)
	assert.Zero(t, sum(tl.grayOnProd), "gray requests answered by prod while gray-1 serves")
}

// (d) Promotion: the gray build becomes prod, its metadata flipped to
// gray=false through the server's instance API (the console's edit,
// which the server keeps across the instance's own re-registrations),
// then the old prod instances stop gracefully: no request fails, and from
// the flip on prod requests may reach it.
//
// The flip is not a re-registration with new metadata: r-nacos 0.8.8
// keeps the metadata an address first registered with as the
// console's, over every later registration of that address, until 60 s
// after it was removed (measured: a deregistration, then a registration
// with gray=false, left gray=true on the server).
func TestDeploy_PromotionOfTheGrayBuild(t *testing.T) {
	f := newFlow(t, "")
	olds := []*instance{f.start("prod-1", false), f.start("prod-2", false), f.start("prod-3", false)}
	g1 := f.start("gray-1", true)
	f.ready(append(olds, g1)...)
	l := startLoad(f.c, reqHTTP, reqUnary, reqStream)
	l.settle(t)

	// The flip: the instance answers as prod from now on (only gray
	// requests reach it until clients see the change).
	flip := time.Now()
	g1.gray.Store(false)
	setInstanceMetadata(t, f.addr, f.svc+"-http", g1.ports[protoHTTP], `{"gray":"false"}`)
	setInstanceMetadata(t, f.addr, f.svc+"-grpc", g1.ports[protoGRPC], `{"gray":"false"}`)
	flipped := time.Now()
	for _, req := range []int{reqHTTP, reqUnary, reqStream} {
		l.waitFor(t, 15*time.Second, reqNames[req]+" prod request answered by the promoted build", func(r record) bool {
			return r.req == req && !r.gray && r.err == nil && r.from("gray-1")
		})
	}
	// The old build goes, all at once, each gracefully.
	var wg sync.WaitGroup
	stops := make([]stopTimes, len(olds))
	for i, old := range olds {
		wg.Add(1)
		go func() { defer wg.Done(); stops[i] = old.stopGracefully() }()
	}
	wg.Wait()
	l.settle(t)
	recs := l.finish()
	tl := count(recs)

	var firstOn [reqKinds]time.Duration
	for k := range firstOn {
		firstOn[k] = -1
	}
	for _, r := range recs {
		if !r.gray && r.err == nil && r.from("gray-1") {
			if d := r.start.Sub(flipped); firstOn[r.req] < 0 || d < firstOn[r.req] {
				firstOn[r.req] = d
			}
		}
	}
	reliabilityFragment(t, "deploy-d-promotion", fmt.Sprintf(
		"| promotion: the gray build's metadata flipped to gray=false (console edit), then the 3 old prod instances stopped gracefully | 3 prod, 1 gray | %s | %d | %d | %d (after the flip: no gray instance left, gray falls back to prod) | the flip (2 metadata updates) took %s; the first prod request on the promoted build %s (HTTP) / %s (gRPC unary) / %s (gRPC stream) after the flip |\n",
		tl.requests(), sum(tl.failed), sum(tl.prodOnGray), sum(tl.grayOnProd), ms(flipped.Sub(flip)), ms(firstOn[reqHTTP]), ms(firstOn[reqUnary]), ms(firstOn[reqStream])))
	for i, st := range stops {
		require.NoError(t, st.err, "deregistering %s", olds[i].name)
	}
	assert.Zero(t, sum(tl.failed), "failed requests: %s", tl.failures())
	checkKinds(t, tl)
}

// sdkFirstListen is how long after a config client is built the Nacos
// SDK first tells the server which documents it listens to (its listen
// round runs every 5 s, and on every push after that): a document
// changed before then reaches the client only at that round. A service
// rolled back is older than that.
const sdkFirstListen = 5 * time.Second

// (e) Rollback: `closed: true` published in the Nacos config document of
// the rules: once it applies no request reaches a gray instance, and none
// fails.
func TestDeploy_RollbackThroughNacosConfig(t *testing.T) {
	dataID := uniqueName(t) + ".json"
	f := newFlow(t, dataID)
	born := time.Now()
	p1, p2 := f.start("prod-1", false), f.start("prod-2", false)
	g1 := f.start("gray-1", true)
	f.ready(p1, p2, g1)
	l := startLoad(f.c, reqHTTP, reqUnary, reqStream)
	time.Sleep(time.Until(born.Add(sdkFirstListen))) // must sleep: a service rolled back is older than the SDK's first listen round (its clock)
	l.settle(t)
	published := time.Now()
	publishConfig(t, f.addr, dataID, `{"closed": true}`)
	for _, req := range []int{reqHTTP, reqUnary, reqStream} {
		l.waitFor(t, 15*time.Second, reqNames[req]+" gray request answered by prod after the rollback", func(r record) bool {
			return r.req == req && r.gray && r.err == nil && r.start.After(published) && !r.answeredByGray()
		})
	}
	l.settle(t)
	recs := l.finish()
	tl := count(recs)

	// Per kind of request, the rollback applied at the first gray request
	// it sent to prod; none sent after that may reach gray.
	var applied [reqKinds]time.Time
	for _, r := range recs {
		if r.gray && r.err == nil && r.start.After(published) && !r.answeredByGray() && (applied[r.req].IsZero() || r.start.Before(applied[r.req])) {
			applied[r.req] = r.start
		}
	}
	var afterApply [reqKinds]int
	for _, r := range recs {
		if !applied[r.req].IsZero() && r.start.After(applied[r.req]) && r.err == nil && r.answeredByGray() {
			afterApply[r.req]++
		}
	}
	rules := f.c.lb.RulesState()
	reliabilityFragment(t, "deploy-e-rollback", fmt.Sprintf(
		"| rollback: `closed: true` published in the Nacos config document of the rules (the caller %s old) | 2 prod, 1 gray | %s | %d | %d | %d (every gray request once it applied) | the rules were accepted %s after the publication; gray requests went to prod from %s (HTTP) / %s (gRPC unary) / %s (gRPC stream) after it, and %d reached gray after that |\n",
		published.Sub(born).Round(100*time.Millisecond), tl.requests(), sum(tl.failed), sum(tl.prodOnGray), sum(tl.grayOnProd), ms(rules.Changed.Sub(published)),
		ms(since(published, applied[reqHTTP])), ms(since(published, applied[reqUnary])), ms(since(published, applied[reqStream])), sum(afterApply)))
	require.True(t, rules.Rules.Closed, "the rules in force are the published ones")
	assert.Zero(t, sum(tl.failed), "failed requests: %s", tl.failures())
	checkKinds(t, tl)
	assert.Zero(t, sum(afterApply), "gray picks after the rollback applied: %v", afterApply)
}
