package nacos_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/nacos"
)

// Route by a Nacos registry: the Supplier subscribes per service, the
// LoadBalancer's cache keeps the last good list, the rule source follows
// a JSON document in Nacos config. (Needs a Nacos server, so it has no
// checked output.)
func Example() {
	sup, err := nacos.NewSupplier(nacos.WithServers("127.0.0.1:8848"), nacos.WithNamespace("public"))
	if err != nil {
		log.Fatal(err)
	}
	defer sup.Close()
	rules, err := nacos.NewRuleSource(nacos.DefaultRulesDataID, nacos.WithServers("127.0.0.1:8848"))
	if err != nil {
		log.Fatal(err)
	}
	defer rules.Close()
	lb, err := graylb.New(sup, graylb.WithRuleSource(rules))
	if err != nil {
		log.Fatal(err)
	}
	defer lb.Close()

	inst, err := lb.Pick(graylb.WithValue(context.Background(), "gray", "true"), "user-service")
	if errors.Is(err, graylb.ErrNoInstance) {
		log.Print("no instance of user-service for this request")
		return
	}
	fmt.Println(inst.Addr())
}

// Bad configuration is refused before any connection is made.
func ExampleNewSupplier_badAddress() {
	_, err := nacos.NewSupplier(nacos.WithServers("nacos-without-port"))
	fmt.Println(errors.Is(err, nacos.ErrConfig))
	// Output: true
}

// Register the running process with gray and version metadata from the
// environment (GRAYLB_GRAY, GRAYLB_VERSION) or from the Service fields.
func ExampleRegister() {
	gray := true
	reg, err := nacos.Register(context.Background(),
		nacos.Service{Name: "user-service", Host: "10.0.0.5", Port: 8080, Gray: &gray, Version: "v2"},
		nacos.WithServers("127.0.0.1:8848"))
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Close() // deregisters
	fmt.Println(reg.Instance.Metadata)
}
