package nacos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"strconv"
	"sync"

	"github.com/graylb/graylb"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
)

// Environment variables read by Register (seed 002 deploys gray instances
// with gray-tag: ${gray:false}; these are graylb's names for the same).
const (
	EnvGray    = "GRAYLB_GRAY"    // "true" registers a gray instance
	EnvVersion = "GRAYLB_VERSION" // the instance's version metadata
)

// registrar is the part of the SDK's naming client Register uses.
type registrar interface {
	RegisterInstance(param vo.RegisterInstanceParam) (bool, error)
	DeregisterInstance(param vo.DeregisterInstanceParam) (bool, error)
}

// Registration is a registered instance; Close deregisters it.
type Registration struct {
	client   registrar
	closeFn  func()
	param    vo.DeregisterInstanceParam
	Instance graylb.Instance
	once     sync.Once
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
// EnvVersion).
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
	nc, owned, err := c.namingClient()
	if err != nil {
		return nil, err
	}
	r := &Registration{client: nc, Instance: inst, param: vo.DeregisterInstanceParam{
		Ip: inst.Host, Port: uint64(inst.Port), Cluster: inst.Cluster, ServiceName: inst.Service, GroupName: c.group, Ephemeral: true,
	}}
	if owned {
		r.closeFn = nc.CloseClient
		waitConnected(nc, c.timeout)
	}
	ok, err := nc.RegisterInstance(vo.RegisterInstanceParam{
		Ip: inst.Host, Port: uint64(inst.Port), Weight: inst.Weight, Enable: true, Healthy: true,
		Metadata: inst.Metadata, ClusterName: inst.Cluster, ServiceName: inst.Service, GroupName: c.group, Ephemeral: true,
	})
	if err == nil && !ok {
		err = errors.New("refused by the server")
	}
	if err != nil {
		if r.closeFn != nil {
			r.closeFn()
		}
		return nil, fmt.Errorf("nacos: register %s %s: %w", inst.Service, inst.Addr(), redact(err, c))
	}
	return r, nil
}

// Close deregisters the instance (and closes the SDK client if Register
// built it).
func (r *Registration) Close() error {
	var err error
	r.once.Do(func() {
		_, err = r.client.DeregisterInstance(r.param)
		if r.closeFn != nil {
			r.closeFn()
		}
	})
	if err != nil {
		return fmt.Errorf("nacos: deregister %s: %w", r.Instance.Addr(), err)
	}
	return nil
}
