// A user's program on redisrules (no Redis server here): loading the rules
// from an address nothing listens on fails within the configured timeout.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/graylb/graylb/redisrules"
	"github.com/redis/go-redis/v9"
)

func main() {
	src, err := redisrules.NewFromOptions(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:1"}},
		redisrules.WithTimeout(time.Second))
	if err != nil {
		fail(err)
	}
	defer src.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := src.Load(ctx); err == nil {
		fail(fmt.Errorf("Load from 127.0.0.1:1 succeeded, want an error"))
	} else {
		fmt.Println("redisrules: loading from an address nothing listens on fails:", err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
