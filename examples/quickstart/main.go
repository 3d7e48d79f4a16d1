// Command quickstart prints how graylb routes prod, gray and unmarked
// requests over an in-memory registry.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/graylb/graylb"
)

func main() {
	reg := graylb.NewRegistry()
	reg.Register(graylb.NewInstance("user-service", "127.0.0.1", 8081, nil))
	reg.Register(graylb.NewInstance("user-service", "127.0.0.1", 8082, nil))
	reg.Register(graylb.NewInstance("user-service", "127.0.0.1", 8083, map[string]string{"gray": "true"}))
	lb, err := graylb.New(reg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer lb.Close()
	fmt.Printf("%-10s %s\n", "gray:", "picked")
	for _, v := range []string{"", "true", "TRUE", "false", "junk"} {
		ctx := graylb.WithValue(context.Background(), "gray", v)
		var picks []string
		for i := 0; i < 4; i++ {
			in, err := lb.Pick(ctx, "user-service")
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			picks = append(picks, in.Addr())
		}
		fmt.Printf("%-10q %v\n", v, picks)
	}
}
