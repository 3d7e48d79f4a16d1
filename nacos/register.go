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
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
)

// Environment variables read by Register, so a deployment marks a gray
// build by its environment alone (gray defaults to false).
const (
	EnvGray    = "GRAYLB_GRAY"    // "true" registers a gray instance
	EnvVersion = "GRAYLB_VERSION" // the instance's version metadata
)

// registrar is the part of the SDK's naming client Register uses with
// WithNamingClient.
type registrar interface {
	RegisterInstance(param vo.RegisterInstanceParam) (bool, error)
	DeregisterInstance(param vo.DeregisterInstanceParam) (bool, error)
}

// Registration is a registered instance; Close deregisters it.
type Registration struct {
	deregister func(context.Context) error
	closeFn    func()
	timeout    time.Duration
	Instance   graylb.Instance
	once       sync.Once
	err        error
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
	GrayKey  string            // metadata key for the gray flag (default "gray")
	Cluster  string
}

// Register registers svc as an ephemeral instance with its gray and
// version metadata, taken from svc or else from the environment (EnvGray,
// EnvVersion), through the Client given by WithClient or a Client of its
// own (closed by Registration.Close). ctx bounds the registration. The SDK
// registers the instance again after every reconnection. A Client holds
// one registration per service (ErrDuplicateRegistration otherwise).
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
	key := svc.GrayKey
	if key == "" {
		key = graylb.DefaultGrayKey
	}
	gray := graylb.IsGray(os.Getenv(EnvGray))
	if svc.Gray != nil {
		gray = *svc.Gray
	}
	inst.Metadata[key] = strconv.FormatBool(gray)
	version := svc.Version
	if version == "" {
		version = os.Getenv(EnvVersion)
	}
	if version != "" {
		inst.Metadata[graylb.DefaultVersionKey] = version
	}
	reg := &Registration{Instance: inst, timeout: c.timeout}
	if c.naming != nil {
		if err := reg.viaSDK(c.naming, c); err != nil {
			return nil, err
		}
		return reg, nil
	}
	if ctx == nil {
		ctx = context.Background()
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
	reg.deregister = func(ctx context.Context) error { return cl.deregister(ctx, inst.Service, c.group, m) }
	return reg, nil
}

// viaSDK registers through an SDK naming client (WithNamingClient).
func (r *Registration) viaSDK(nc registrar, c *config) error {
	inst := r.Instance
	ok, err := nc.RegisterInstance(vo.RegisterInstanceParam{
		Ip: inst.Host, Port: uint64(inst.Port), Weight: inst.Weight, Enable: true, Healthy: true,
		Metadata: inst.Metadata, ClusterName: inst.Cluster, ServiceName: inst.Service, GroupName: c.group, Ephemeral: true,
	})
	if err == nil && !ok {
		err = errors.New("refused by the server")
	}
	if err != nil {
		return fmt.Errorf("nacos: register %s %s: %w", inst.Service, inst.Addr(), redact(err, c))
	}
	param := vo.DeregisterInstanceParam{
		Ip: inst.Host, Port: uint64(inst.Port), Cluster: inst.Cluster, ServiceName: inst.Service, GroupName: c.group, Ephemeral: true,
	}
	r.deregister = func(context.Context) error {
		ok, err := nc.DeregisterInstance(param)
		if err == nil && !ok {
			err = errors.New("refused by the server")
		}
		return err
	}
	return nil
}

// Close deregisters the instance, waiting at most the timeout of the
// options (WithTimeout), and closes the Client if Register built it.
func (r *Registration) Close() error {
	r.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
		defer cancel()
		if err := r.deregister(ctx); err != nil {
			r.err = fmt.Errorf("nacos: deregister %s: %w", r.Instance.Addr(), err)
		}
		if r.closeFn != nil {
			r.closeFn()
		}
	})
	return r.err
}
