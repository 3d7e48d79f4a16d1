package graylb_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/graylb/graylb"
)

// Register prod and gray instances in the in-memory registry and pick for
// a prod, a gray and an unmarked request.
func Example() {
	reg := graylb.NewRegistry()
	reg.Register(graylb.NewInstance("user-service", "10.0.0.1", 8080, nil))
	reg.Register(graylb.NewInstance("user-service", "10.0.0.2", 8080, map[string]string{"gray": "true"}))

	lb, _ := graylb.New(reg)
	defer lb.Close()

	ctx := context.Background()
	gray := graylb.WithValue(ctx, "gray", "TRUE") // what a header would carry
	prod := graylb.WithValue(ctx, "gray", "false")
	for _, c := range []context.Context{gray, prod, ctx} {
		in, _ := lb.Pick(c, "user-service")
		fmt.Println(in.Addr())
	}
	// Output:
	// 10.0.0.2:8080
	// 10.0.0.1:8080
	// 10.0.0.1:8080
}

// A prod request never reaches a gray instance: with only gray instances
// it fails with ErrNoInstance, while a gray request falls back to prod
// when no gray instance exists.
func Example_noInstance() {
	reg := graylb.NewRegistry()
	reg.Register(graylb.NewInstance("order-service", "10.0.0.9", 9090, map[string]string{"gray": "true"}))
	lb, _ := graylb.New(reg)
	defer lb.Close()

	_, err := lb.Pick(context.Background(), "order-service")
	fmt.Println(errors.Is(err, graylb.ErrNoInstance), err)
	// Output:
	// true graylb: no instance of "order-service" for prod request
}

// Rules make requests gray by user and close gray routing at run time.
func ExampleRules() {
	reg := graylb.NewRegistry()
	reg.Register(graylb.NewInstance("cart", "10.0.0.1", 80, nil))
	reg.Register(graylb.NewInstance("cart", "10.0.0.2", 80, map[string]string{"gray": "true"}))

	rules, err := graylb.ParseRules([]byte(`{"grayUsers": ["alice"]}`))
	if err != nil {
		panic(err)
	}
	lb, _ := graylb.New(reg, graylb.WithRules(rules))
	defer lb.Close()

	alice := graylb.WithValue(context.Background(), "uid", "alice")
	in, _ := lb.Pick(alice, "cart")
	fmt.Println("alice:", in.Addr())

	lb.SetRules(graylb.Rules{Closed: true}) // roll back: nobody reaches gray
	in, _ = lb.Pick(alice, "cart")
	fmt.Println("closed:", in.Addr())

	fmt.Println(lb.SetRules(graylb.Rules{CanaryPercent: 150}) != nil)
	// Output:
	// alice: 10.0.0.2:80
	// closed: 10.0.0.1:80
	// true
}

// An Observer counts outcomes, the way Envoy counts subset fall-backs.
func ExampleObserver() {
	reg := graylb.NewRegistry()
	reg.Register(graylb.NewInstance("cart", "10.0.0.1", 80, nil))
	counts := map[graylb.Outcome]int{}
	lb, _ := graylb.New(reg, graylb.WithObserver(func(service string, kind graylb.Kind, o graylb.Outcome) {
		counts[o]++ // a real observer would use atomic counters
	}))
	defer lb.Close()
	lb.Pick(graylb.WithValue(context.Background(), "gray", "true"), "cart")
	lb.Pick(context.Background(), "cart")
	fmt.Println(counts[graylb.Selected], counts[graylb.FellBack])
	// Output: 1 1
}

// A caller that calls one service again and again picks through its
// ServicePicker, which skips finding the service by name on every call.
func ExampleLoadBalancer_Service() {
	reg := graylb.NewRegistry()
	reg.Register(graylb.NewInstance("stock", "10.0.3.1", 80, nil))
	reg.Register(graylb.NewInstance("stock", "10.0.3.2", 80, map[string]string{"gray": "true"}))
	lb, _ := graylb.New(reg)
	defer lb.Close()

	stock, _ := lb.Service("stock")
	gray, _ := stock.Pick(graylb.WithValue(context.Background(), "gray", "true"))
	prod, _ := stock.Pick(context.Background())
	fmt.Println(stock.Name(), gray.Addr(), prod.Addr())

	_, err := lb.Service("no such/service")
	fmt.Println(errors.Is(err, graylb.ErrInvalidService))
	// Output:
	// stock 10.0.3.2:80 10.0.3.1:80
	// true
}
