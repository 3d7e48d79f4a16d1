package filter_test

import (
	"context"
	"fmt"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/filter"
)

// Zone affinity in one expression: prefer the instances of the caller's
// zone (the instance's Cluster), read from the request key "zone", else
// every candidate. The grouping runs once
// per list change; a pick only looks the zone up.
func ExamplePartition() {
	reg := graylb.NewRegistry()
	a := graylb.NewInstance("pay", "10.0.1.1", 80, nil)
	a.Cluster = "zone-a"
	b := graylb.NewInstance("pay", "10.0.2.1", 80, nil)
	b.Cluster = "zone-b"
	reg.Register(a)
	reg.Register(b)

	zone := filter.Partition(200, "zone", // after the version filter (100)
		func(in graylb.Instance) string { return in.Cluster })
	lb, _ := graylb.New(reg, graylb.WithFilters(zone))
	defer lb.Close()
	in, _ := lb.Pick(graylb.WithValue(context.Background(), "zone", "zone-b"), "pay")
	fmt.Println(in.Addr())
	// Output: 10.0.2.1:80
}
