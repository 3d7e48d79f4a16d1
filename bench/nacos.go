package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/graylb/graylb/filter"
	"github.com/graylb/graylb/nacos"
	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
)

// NacosFixture registers the instances of a list in a real Nacos server
// as one service (a batch registration from one client) and removes them
// on Close.
type NacosFixture struct {
	Addr    string
	Service string
	reg     naming_client.INamingClient
	dir     string
}

func sdkClient(addr, dir string) (naming_client.INamingClient, error) {
	return sdkClientTimeout(addr, dir, 10*time.Second)
}

// sdkClientTimeout is sdkClient whose requests wait up to timeout.
func sdkClientTimeout(addr, dir string, timeout time.Duration) (naming_client.INamingClient, error) {
	host, port, err := splitHostPort(addr)
	if err != nil {
		return nil, err
	}
	cc := constant.NewClientConfig(constant.WithCacheDir(dir+"/cache"), constant.WithLogDir(dir+"/log"),
		constant.WithLogLevel("error"), constant.WithNotLoadCacheAtStart(true), constant.WithTimeoutMs(uint64(timeout.Milliseconds())))
	nc, err := clients.NewNamingClient(vo.NacosClientParam{ClientConfig: cc, ServerConfigs: []constant.ServerConfig{*constant.NewServerConfig(host, port)}})
	if err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(5 * time.Second); !nc.ServerHealthy() && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	return nc, nil
}

func splitHostPort(addr string) (string, uint64, error) {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			p, err := strconv.ParseUint(addr[i+1:], 10, 16)
			return addr[:i], p, err
		}
	}
	return "", 0, fmt.Errorf("no port in %q", addr)
}

// registerAttempts is how many times NewNacosFixture sends its batch: on a
// loaded machine a batch of 10 000 instances has outlasted the SDK's
// timeout, or come back as a malformed answer, in about one run in three;
// sending it again registers the same set (a batch replaces the client's).
const registerAttempts = 3

// NewNacosFixture registers list under a new service name.
func NewNacosFixture(addr, dir string, list []graylb.Instance) (*NacosFixture, error) {
	nc, err := sdkClientTimeout(addr, dir+"/reg", time.Minute)
	if err != nil {
		return nil, err
	}
	f := &NacosFixture{Addr: addr, Service: fmt.Sprintf("bench-%d-%d", len(list), time.Now().UnixNano()%1e6), reg: nc, dir: dir}
	params := make([]vo.RegisterInstanceParam, len(list))
	for i, in := range list {
		params[i] = vo.RegisterInstanceParam{Ip: in.Host, Port: uint64(in.Port), Weight: in.Weight, Enable: true, Healthy: true,
			Ephemeral: true, Metadata: in.Metadata, ServiceName: f.Service}
	}
	// One batch: Nacos 2 keeps one registration set per client and service.
	var ok bool
	for range registerAttempts {
		if ok, err = nc.BatchRegisterInstance(vo.BatchRegisterInstanceParam{ServiceName: f.Service, Instances: params}); err == nil && ok {
			break
		}
	}
	if err != nil || !ok {
		nc.CloseClient()
		return nil, fmt.Errorf("batch register %d instances: %v", len(params), err)
	}
	return f, nil
}

// Close deregisters by closing the registering client.
func (f *NacosFixture) Close() { f.reg.CloseClient() }

// waitFor polls until fn reports true or the deadline passes.
func waitFor(d time.Duration, fn func() bool) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if fn() {
			return true
		}
	}
	return false
}

// NacosSDK is nacos-sdk-go's own selection, SelectOneHealthyInstance, on a
// subscribed service (served from the SDK's cache): no gray filtering.
func NacosSDK(f *NacosFixture) Peer {
	return Peer{Name: "nacos-sdk-go SelectOneHealthyInstance", Note: "no gray filter; rebuilds and sorts per call", Build: func(list []graylb.Instance) (Picker, error) {
		nc, err := sdkClient(f.Addr, f.dir+"/sdk")
		if err != nil {
			return Picker{}, err
		}
		if err := nc.Subscribe(&vo.SubscribeParam{ServiceName: f.Service, SubscribeCallback: func([]model.Instance, error) {}}); err != nil {
			return Picker{}, err
		}
		if !waitFor(30*time.Second, func() bool {
			l, err := nc.SelectAllInstances(vo.SelectAllInstancesParam{ServiceName: f.Service})
			return err == nil && len(l) == len(list)
		}) {
			nc.CloseClient()
			return Picker{}, fmt.Errorf("the SDK never saw %d instances of %s", len(list), f.Service)
		}
		param := vo.SelectOneHealthInstanceParam{ServiceName: f.Service}
		return Picker{
			Pick: func(ctx context.Context) (graylb.Instance, error) {
				in, err := nc.SelectOneHealthyInstance(param)
				if err != nil {
					return graylb.Instance{}, err
				}
				return graylb.Instance{Host: in.Ip, Port: int(in.Port), Metadata: in.Metadata}, nil
			},
			Close: nc.CloseClient,
		}, nil
	}}
}

// GraylbNacos is graylb (round robin, gray + version) on its Nacos
// supplier over the same service.
func GraylbNacos(f *NacosFixture) Peer {
	return Peer{Name: "graylb on nacos.Supplier", Note: "same pick path; the list comes from Nacos", Build: func(list []graylb.Instance) (Picker, error) {
		sup, err := nacos.NewSupplier(nacos.WithServers(f.Addr), nacos.WithCacheDir(f.dir+"/glb/cache"), nacos.WithLogDir(f.dir+"/glb/log"), nacos.WithLogLevel("error"))
		if err != nil {
			return Picker{}, err
		}
		lb, err := graylb.New(sup, graylb.WithFilters(filter.Version()))
		if err != nil {
			return Picker{}, err
		}
		if !waitFor(30*time.Second, func() bool {
			l, err := adapter.For(lb).Cache().Instances(context.Background(), f.Service)
			return err == nil && len(l) == len(list)
		}) {
			lb.Close()
			return Picker{}, fmt.Errorf("graylb never saw %d instances of %s", len(list), f.Service)
		}
		return Picker{
			Pick:  func(ctx context.Context) (graylb.Instance, error) { return lb.Pick(ctx, f.Service) },
			Close: func() { lb.Close(); sup.Close() },
		}, nil
	}}
}
