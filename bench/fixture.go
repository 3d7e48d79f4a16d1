// Package bench runs graylb side by side with its peers in one process and
// writes the results (see cmd/report and BENCHMARKS.md at the repository
// root). It is a separate module so that the library never depends on the
// peers.
package bench

import (
	"context"
	"fmt"

	"github.com/graylb/graylb"
)

// Sizes are the instance counts every peer is measured at.
var Sizes = []int{10, 100, 1000, 10000}

// Instances returns n instances of "svc": odd ones gray, and half of them
// (i%4 in {0,1}, so prod and gray alike) tagged version v1.
func Instances(n int) []graylb.Instance {
	list := make([]graylb.Instance, n)
	for i := range list {
		md := map[string]string{"gray": "false"}
		if i%2 == 1 {
			md["gray"] = "true"
		}
		if i%4 < 2 {
			md["version"] = "v1"
		}
		list[i] = graylb.NewInstance("svc", fmt.Sprintf("10.%d.%d.%d", i/65536, (i/256)%256, i%256), 8080, md)
	}
	return list
}

// Requests are the two requests every peer alternates: a gray and a prod
// one, both asking for version v1, carried as graylb context values.
func Requests() [2]context.Context {
	gray := graylb.WithValue(graylb.WithValue(context.Background(), "gray", "true"), "version", "v1")
	prod := graylb.WithValue(graylb.WithValue(context.Background(), "gray", "false"), "version", "v1")
	return [2]context.Context{gray, prod}
}

// Expected reports whether inst is a right answer for a request of kind
// gray over Instances(n) with version v1 (every kind has v1 instances).
func Expected(inst graylb.Instance, gray bool) bool {
	return graylb.IsGray(inst.Metadata["gray"]) == gray && inst.Metadata["version"] == "v1"
}
