package kratosnacos_test

import (
	"context"
	"testing"

	"github.com/go-kratos/kratos/v2/registry"
	kratosnacos "github.com/graylb/graylb/kratos/nacos"
	"github.com/graylb/graylb/nacos"
)

// TestRegistrarBadInput: instances that cannot be registered are refused
// before Nacos is asked; an instance never registered deregisters as a
// no-op.
func TestRegistrarBadInput(t *testing.T) {
	r := kratosnacos.NewRegistrar(kratosnacos.WithNacosOptions(nacos.WithServers("127.0.0.1:1")), nil)
	for name, si := range map[string]*registry.ServiceInstance{
		"nil":         nil,
		"no name":     {Endpoints: []string{"http://127.0.0.1:8000"}},
		"no endpoint": {Name: "x"},
		"bad port":    {Name: "x", Endpoints: []string{"http://127.0.0.1:x"}},
		"bad name":    {Name: "x\n", Endpoints: []string{"http://127.0.0.1:8000"}},
	} {
		if err := r.Register(context.Background(), si); err == nil {
			t.Errorf("%s: registered", name)
		}
	}
	if err := r.Deregister(context.Background(), nil); err == nil {
		t.Error("Deregister(nil): no error")
	}
	if err := r.Deregister(context.Background(), &registry.ServiceInstance{Name: "never"}); err != nil {
		t.Errorf("Deregister of an instance never registered: %v", err)
	}
}
