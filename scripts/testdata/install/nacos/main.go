// A user's program on nacos (no Nacos server here): the Supplier refuses a
// server address without a port before connecting anywhere.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/graylb/graylb/nacos"
)

func main() {
	_, err := nacos.NewSupplier(nacos.WithServers("nacos-without-port"))
	if !errors.Is(err, nacos.ErrConfig) {
		fmt.Fprintf(os.Stderr, "NewSupplier(nacos-without-port): %v, want an ErrConfig\n", err)
		os.Exit(1)
	}
	fmt.Println("nacos: a bad server address is refused:", err)
}
