package redisrules_test

import (
	"context"
	"fmt"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/redisrules"
	"github.com/redis/go-redis/v9"
)

// A release operated by writing the three keys: gray routing on, alice a
// gray user, 10.0.0.2 a gray instance. alice's requests go to the gray
// instance, bob's to prod. The user id is the program's (the authenticated
// user), never a header an outside caller sets.
func Example() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: sharedAddr}) // credentials and TLS go here
	defer rdb.Close()
	rdb.Del(ctx, redisrules.DefaultSwitchKey, redisrules.DefaultUsersKey, redisrules.DefaultAddressesKey)
	// What an operator does with redis-cli: SET, RPUSH.
	rdb.Set(ctx, redisrules.DefaultSwitchKey, "true", 0)
	rdb.RPush(ctx, redisrules.DefaultUsersKey, "alice")
	rdb.RPush(ctx, redisrules.DefaultAddressesKey, "10.0.0.2")

	src, err := redisrules.New(rdb, redisrules.WithPollInterval(time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer src.Close()

	reg := graylb.NewRegistry()
	reg.Register(graylb.NewInstance("cart", "10.0.0.1", 8080, nil))
	reg.Register(graylb.NewInstance("cart", "10.0.0.2", 8080, nil))
	lb, err := graylb.New(reg, graylb.WithRuleSource(src)) // loads the rules, then follows them
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lb.Close()

	for _, user := range []string{"alice", "bob"} {
		in, _ := lb.Pick(graylb.WithValue(ctx, graylb.DefaultUserHeader, user), "cart")
		fmt.Println(user, in.Addr())
	}
	// Output:
	// alice 10.0.0.2:8080
	// bob 10.0.0.1:8080
}
