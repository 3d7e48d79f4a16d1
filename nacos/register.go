package nacos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
)

// Environment variables read by Register, so a deployment marks a gray
// build by its environment alone (gray defaults to false).
const (
	EnvGray    = "GRAYLB_GRAY"    // "true" registers a gray instance
	EnvVersion = "GRAYLB_VERSION" // the instance's version metadata
)

// MetadataStarted is the metadata key under which Register writes when the
// registering process started, in Unix milliseconds ("1767225600000"),
// unless Service.Metadata has the key. The SDK registers again after a
// reconnection with the same metadata, so a new value on an address is a
// new process there: graylb rollout counts a gray build's restarts by it.
const MetadataStarted = "graylb.started"

// processStarted is MetadataStarted's value: when this package was
// initialised, as the process started.
var processStarted = strconv.FormatInt(time.Now().UnixMilli(), 10)

// registrar is the part of the SDK's naming client Register uses with
// WithNamingClient.
type registrar interface {
	RegisterInstance(param vo.RegisterInstanceParam) (bool, error)
	DeregisterInstance(param vo.DeregisterInstanceParam) (bool, error)
}

// DefaultDrainWait is how long Registration.Deregister waits, once the
// server has taken the instance off its list, before it returns and the
// caller stops serving: the time every subscribed client needs to receive
// the push that drops the instance and stop picking it. A Nacos server
// pushes a naming change within about a second (r-nacos merges pushes in
// 500 ms windows checked every 500 ms, so 0.5-1 s; the official server
// within about a second), and graylb's Supplier applies a push as it
// arrives. Two seconds is twice the slowest push: margin for a loaded
// machine, and short next to the grace period an orchestrator gives a
// stopping process (tens of seconds).
const DefaultDrainWait = 2 * time.Second

// DefaultQuietPeriod is how long no call may have arrived before the
// Deregister of a Registration with WithLoadBalancer returns: longer than
// the gaps between the calls of a caller still sending.
const DefaultQuietPeriod = 3 * time.Second

// DefaultDrainMax bounds, from the removal, how long such a Deregister
// waits for callers to stop: Spring Cloud LoadBalancer caches instance
// lists for 35 s by default (spring.cloud.loadbalancer.cache.ttl), and
// its callers stop only when their cache expires.
const DefaultDrainMax = 45 * time.Second

// Registration is a registered instance. Deregister takes it off the
// registry and waits until clients have had the time to see it go;
// Close deregisters it at once and closes the Client Register built.
//
// Every call that talks to the server is bounded: Deregister and
// CloseContext by their ctx, Close by DefaultCloseTimeout.
//
// A graceful stop, in this order, as Spring Cloud and Kratos services stop
// on Nacos:
//
//	<-sigterm
//	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
//	defer cancel()
//	if err := reg.Deregister(ctx); err != nil { // off the list, drained
//		log.Print(err)
//	}
//	srv.Shutdown(ctx) // or grpcServer.GracefulStop(): in-flight requests finish
//	reg.CloseContext(ctx)
//
// Stopping the server first would refuse the requests clients keep
// sending until they see the deregistration.
type Registration struct {
	deregister func(context.Context) error
	closeFn    func()
	timeout    time.Duration
	drain      time.Duration
	lb         *graylb.LoadBalancer // WithLoadBalancer: Deregister waits for its callers
	quiet      time.Duration
	drainMax   time.Duration
	Instance   graylb.Instance

	mu        sync.Mutex
	removal   chan struct{} // closed when the removal ended; nil until it starts
	removeErr error         // the removal's; set before removal is closed
	removedAt time.Time     // when the removal ended; set before removal is closed
	closeOnce sync.Once
}

// Service describes the running instance to register.
type Service struct {
	Name     string
	Host     string
	Port     int
	Weight   float64           // default 1
	Gray     *bool             // default: EnvGray
	Version  string            // default: EnvVersion
	Metadata map[string]string // more metadata; copied
	GrayKey  string            // metadata key for the gray flag (default: see Register)
	Cluster  string
}

// Register registers svc as an ephemeral instance with its gray and
// version metadata and the process's start (MetadataStarted), through the
// Client given by WithClient or a Client of its own (closed by
// Registration.Close). ctx bounds the registration. The SDK registers the
// instance again after every reconnection. A Client holds one registration
// per service (ErrDuplicateRegistration otherwise).
//
// The keys and the kind are the process's: with WithLoadBalancer, the
// LoadBalancer's metadata keys and own flag, and a Service or environment
// that says otherwise is refused (ErrMismatch). Without it, the kind is
// svc.Gray, else EnvGray; the gray key svc.GrayKey, else the one every
// LoadBalancer of the process reads (adapter.Live), else "gray"; a gray key
// that none of them reads is refused (ErrMismatch).
//
// Through a Client (WithClient, or its own), the registration then reads
// itself back from the server, and again after each reconnection: metadata
// that differs from what it registered (an operator's edit in the console,
// which the server keeps across the instance's restarts) is written again
// over the HTTP API, and one the server keeps refusing is logged as an
// error naming the instance.
func Register(ctx context.Context, svc Service, opts ...Option) (*Registration, error) {
	c := newConfig(opts)
	inst := graylb.NewInstance(svc.Name, svc.Host, svc.Port, maps.Clone(svc.Metadata))
	inst.Cluster = svc.Cluster
	if svc.Weight != 0 {
		inst.Weight = svc.Weight
	}
	if err := inst.Validate(); err != nil {
		return nil, fmt.Errorf("nacos: register: %w", err)
	}
	if inst.Metadata == nil {
		inst.Metadata = map[string]string{}
	}
	id, err := identify(svc, c)
	if err != nil {
		return nil, err
	}
	inst.Metadata[id.grayKey] = strconv.FormatBool(id.gray)
	version := svc.Version
	if version == "" {
		version = os.Getenv(EnvVersion)
	}
	if version != "" {
		inst.Metadata[id.versionKey] = version
	}
	if _, ok := inst.Metadata[MetadataStarted]; !ok {
		inst.Metadata[MetadataStarted] = processStarted
	}
	reg := &Registration{Instance: inst, timeout: c.timeout, drain: c.drainWait, lb: c.lb, quiet: c.quiet, drainMax: c.drainMax}
	if ctx == nil {
		ctx = context.Background()
	}
	if c.naming != nil {
		if err := reg.viaSDK(ctx, c.naming, c); err != nil {
			return nil, err
		}
		return reg, nil
	}
	cl := c.client
	if cl == nil {
		own, err := NewClient(ctx, opts...)
		if err != nil {
			return nil, err
		}
		cl = own
		reg.closeFn = func() { own.Close() }
	}
	m := model.Instance{
		Ip: inst.Host, Port: uint64(inst.Port), Weight: inst.Weight, Enable: true, Healthy: true,
		Metadata: inst.Metadata, ClusterName: inst.Cluster, Ephemeral: true,
	}
	if err := cl.register(ctx, inst.Service, c.group, m); err != nil {
		if reg.closeFn != nil {
			reg.closeFn()
		}
		return nil, fmt.Errorf("nacos: register %s %s: %w", inst.Service, inst.Addr(), redact(err, c))
	}
	reg.deregister = func(ctx context.Context) error { return cl.deregister(ctx, c.timeout, inst.Service, c.group, m) }
	return reg, nil
}

// viaSDK registers through an SDK naming client (WithNamingClient),
// within ctx: the SDK's call honours only its own timeout, so it runs on a
// goroutine of its own, and a registration it completes after ctx ended
// is taken back (the SDK would register it again after every reconnection).
func (r *Registration) viaSDK(ctx context.Context, nc registrar, c *config) error {
	inst := r.Instance
	param := vo.DeregisterInstanceParam{
		Ip: inst.Host, Port: uint64(inst.Port), Cluster: inst.Cluster, ServiceName: inst.Service, GroupName: c.group, Ephemeral: true,
	}
	type result struct {
		ok  bool
		err error
	}
	done := make(chan result, 1)
	go func() {
		ok, err := nc.RegisterInstance(vo.RegisterInstanceParam{
			Ip: inst.Host, Port: uint64(inst.Port), Weight: inst.Weight, Enable: true, Healthy: true,
			Metadata: inst.Metadata, ClusterName: inst.Cluster, ServiceName: inst.Service, GroupName: c.group, Ephemeral: true,
		})
		done <- result{ok, err}
	}()
	var ok bool
	var err error
	select {
	case res := <-done:
		ok, err = res.ok, res.err
	case <-ctx.Done():
		select {
		case res := <-done: // answered as ctx ended: the answer stands
			ok, err = res.ok, res.err
		default:
			go func() {
				if res := <-done; res.err == nil && res.ok {
					nc.DeregisterInstance(param)
				}
			}()
			err = ctx.Err()
		}
	}
	if err == nil && !ok {
		err = errors.New("refused by the server")
	}
	if err != nil {
		return fmt.Errorf("nacos: register %s %s: %w", inst.Service, inst.Addr(), redact(err, c))
	}
	r.deregister = func(ctx context.Context) error {
		// The SDK's call honours only its own timeout: ctx and WithTimeout
		// bound the wait for its answer.
		ctx, cancel := context.WithTimeout(ctx, r.timeout)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			ok, err := nc.DeregisterInstance(param)
			if err == nil && !ok {
				err = errors.New("refused by the server")
			}
			done <- err
		}()
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			select {
			case err := <-done: // answered as ctx ended: the answer stands
				return err
			default:
				return ctx.Err()
			}
		}
	}
	return nil
}

// Deregister takes the instance off the registry, then waits the drain
// wait (WithDrainWait, default DefaultDrainWait) from the moment the
// server answered, so that clients stop sending before the caller stops
// serving (see Registration). Keep serving meanwhile: requests clients
// picked before the push still arrive. With WithLoadBalancer it then waits
// until no call has reached the LoadBalancer's server sides for the quiet
// period (WithQuietPeriod), at most WithDrainMax from the removal: callers
// that cache the instance list (Spring Cloud LoadBalancer) drain whatever
// their cache; calls still arriving when it gives up are reported in an
// error wrapping ErrCallersRemain.
//
// ctx bounds both steps; when it ends first, Deregister returns at once
// with an error wrapping ctx.Err() (after the removal, the instance is off
// the list all the same). A Client that lost its connection (a restarting
// server) is waited for until ctx ends, however long: pass a ctx with a
// deadline (the grace period the process has to stop). WithTimeout bounds
// each call to the server, not that wait.
//
// The wait follows the removal whatever its outcome: a server that applied
// the removal may have lost its answer, and serving a little longer never
// refuses anyone. An error from the removal wraps the server's cause, or
// graylb.ErrClosed when the Client given by WithClient closed meanwhile
// (keep it open until Deregister returns).
//
// The instance is removed once, within the ctx of the first call (or
// Close's bound, when Close came first): later and concurrent calls wait
// for that removal and until the same drain wait has passed, or until
// their own ctx ends, and return its error. Close after Deregister only
// closes the Client Register built.
func (r *Registration) Deregister(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	done, _ := r.remove(ctx)
	select {
	case <-done:
	case <-ctx.Done():
	}
	if !isClosed(done) { // ctx ended first (both may be ready: an ended removal wins)
		return fmt.Errorf("nacos: deregister %s: %w", r.Instance.Addr(), ctx.Err())
	}
	err := r.removeErr
	if wait := time.Until(r.removedAt.Add(r.drain)); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			// What is ready wins: a wait that ended as ctx did is complete.
			if time.Now().Before(r.removedAt.Add(r.drain)) {
				return errors.Join(err, fmt.Errorf("nacos: deregister %s: drain wait cut short: %w", r.Instance.Addr(), ctx.Err()))
			}
		}
	}
	if r.lb != nil {
		err = errors.Join(err, r.waitQuiet(ctx))
	}
	return err
}

// ErrCallersRemain: Deregister stopped waiting for callers to stop (its
// ctx ended, or WithDrainMax passed) while calls still arrived: callers
// that cache instance lists longer than that will see this instance fail.
var ErrCallersRemain = errors.New("nacos: callers still calling the deregistered instance")

// waitQuiet waits until no call reached the LoadBalancer's server sides
// for the quiet period, within ctx and the drain maximum from the removal.
func (r *Registration) waitQuiet(ctx context.Context) error {
	qctx, cancel := context.WithDeadline(ctx, r.removedAt.Add(r.drainMax))
	defer cancel()
	last, err := adapter.For(r.lb).Quiet(qctx, r.quiet)
	if err == nil || last.IsZero() { // no caller came since the drain began
		return nil
	}
	ago := fmt.Sprintf("the last %v ago", time.Since(last).Round(time.Millisecond))
	why := fmt.Sprintf("the drain maximum (%v) passed", r.drainMax)
	if ctx.Err() != nil {
		why = ctx.Err().Error()
	}
	return fmt.Errorf("nacos: deregister %s: %w %v after its removal (%s; %s): raise the deadline of Deregister's ctx and WithDrainMax, or shorten the callers' cache",
		r.Instance.Addr(), ErrCallersRemain, time.Since(r.removedAt).Round(time.Millisecond), ago, why)
}

// remove starts the removal unless it started, within ctx, and returns a
// channel closed when it ended (removeErr and removedAt are then set); it
// reports whether this call started it. The removal runs on its own
// goroutine, so that every caller waits for it as long as its own ctx
// allows; it ends when ctx does.
func (r *Registration) remove(ctx context.Context) (done <-chan struct{}, started bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.removal != nil {
		return r.removal, false
	}
	ch := make(chan struct{})
	r.removal = ch
	go func() {
		defer close(ch)
		if err := r.deregister(ctx); err != nil {
			r.removeErr = fmt.Errorf("nacos: deregister %s: %w", r.Instance.Addr(), err)
		}
		r.removedAt = time.Now()
	}()
	return ch, true
}

// DefaultCloseTimeout bounds Registration.Close: the time it gives the
// removal, the wait for a lost connection included, before it closes the
// Client Register built. Closing that Client ends its connection, and with
// it every ephemeral instance registered over it, so a server that comes
// back never lists the instance again; a Client given by WithClient goes on
// removing it in the background.
const DefaultCloseTimeout = time.Second

// Close is CloseContext bounded by the smaller of DefaultCloseTimeout and
// the timeout of the options (WithTimeout).
func (r *Registration) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), min(r.timeout, DefaultCloseTimeout))
	defer cancel()
	return r.CloseContext(ctx)
}

// CloseContext deregisters the instance unless Deregister did, without
// the drain wait, and closes the Client if Register built it. ctx bounds
// that removal, the wait for a lost connection included: when ctx ends
// first, CloseContext returns after closing the Client, with an error
// wrapping ctx.Err() (and ErrUnavailable when the Client was not
// connected). Closing the Client ends its calls in flight within the SDK's
// retries: about 300 ms more on a server that does not answer (measured
// with a SIGSTOPped and a killed server,
// TestIntegration_StalledServerRegistrationClose). Beside a Deregister still removing the instance, it waits
// for that removal within ctx, then closes the Client Register built
// (which ends the removal with an error wrapping graylb.ErrClosed); with a
// Client given by WithClient it returns an error wrapping ctx.Err() while
// that removal goes on within its Deregister's ctx. It returns the
// removal's error otherwise, is idempotent, and never waits for the drain
// wait.
func (r *Registration) CloseContext(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	done, started := r.remove(ctx)
	select {
	case <-done:
	case <-ctx.Done():
	}
	if started {
		<-done // CloseContext's own removal ends with ctx
	}
	r.closeOnce.Do(func() {
		if r.closeFn != nil {
			r.closeFn()
		}
	})
	if r.closeFn != nil {
		// A Deregister's removal ends once the Client closed: its wait for
		// the connection at once, a call in flight within the timeout.
		<-done
	}
	if !isClosed(done) {
		return fmt.Errorf("nacos: deregister %s: still under way when Close gave up: %w", r.Instance.Addr(), ctx.Err())
	}
	return r.removeErr
}
