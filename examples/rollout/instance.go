package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/nacos"
)

// instance runs one instance of the service until ctx ends, then stops it
// gracefully: off the registry, serving while clients see it, then shut
// down.
func instance(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("rollout instance", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: rollout instance [flags]\n\nFaults (-fault) a gray build can have:\n")
		for _, f := range faults {
			name := f.name
			if name == "" {
				name = `""`
			}
			fmt.Fprintf(fs.Output(), "  %-16s %s\n", name, f.what)
		}
		fmt.Fprintln(fs.Output(), "\nFlags:")
		fs.PrintDefaults()
	}
	server := fs.String("nacos", envOr("GRAYLB_NACOS_ADDR", "127.0.0.1:8848"), "Nacos server host:port")
	service := fs.String("service", "user-service", "service name")
	host := fs.String("host", "127.0.0.1", "address to listen on and register")
	port := fs.Int("port", 0, "port to listen on and register (0: any free port)")
	gray := fs.Bool("gray", false, "register as a gray instance")
	fault := fs.String("fault", "", "how this build is broken (see above; empty: it is not)")
	crashAfter := fs.Duration("crash-after", 10*time.Second, "with -fault crash: how long the process lives")
	drain := fs.Duration("drain", nacos.DefaultDrainWait, "how long to keep serving after deregistering, while clients see it")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	b, err := newBuild(*fault, *gray, out)
	if err != nil {
		return err
	}
	// Listen and serve first, then register: a client that learns of the
	// instance can connect at once.
	lis, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: b, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(lis)
	defer srv.Close()
	p := lis.Addr().(*net.TCPAddr).Port
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	reg, err := nacos.Register(rctx, nacos.Service{Name: *service, Host: *host, Port: p, Gray: gray},
		nacos.WithServers(*server), nacos.WithDrainWait(*drain))
	if err != nil {
		return err
	}
	defer reg.Close()
	fmt.Fprintf(out, "registered %s at %s as %s, fault %q\n", *service, reg.Instance.Addr(), b.kind, b.fault.name)
	if b.fault.name == "crash" {
		// A crash: no deregistration, no shutdown; the registry drops the
		// instance when its connection closes.
		time.AfterFunc(*crashAfter, func() {
			fmt.Fprintf(out, "crashing after %s\n", *crashAfter)
			os.Exit(3)
		})
	}
	<-ctx.Done()
	fmt.Fprintln(out, "deregistering; serving on while clients see it")
	dctx, dcancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer dcancel()
	if err := reg.Deregister(dctx); err != nil {
		fmt.Fprintln(out, err) // stop all the same
	}
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	srv.Shutdown(sctx) // a hung or stalled request ends with its client, or here
	if b.kind == graylb.Gray.String() {
		fmt.Fprintf(out, "prod requests received: %d\n", b.prodRequests.Load())
	}
	return nil
}

// endpoints are the service's five endpoints.
var endpoints = []string{"/users", "/orders", "/items", "/cart", "/search"}

// serviceTime is how long the service takes to answer: 15 ms plus an
// exponential time of mean 15 ms.
func serviceTime() time.Duration {
	return time.Duration((15 + rand.ExpFloat64()*15) * float64(time.Millisecond))
}

// answer is an answer's body (JSON, about 1 KiB): the endpoint's items,
// the same from every instance and build, beside a request id and a time
// stamp that differ on every answer (what a shadow comparison must learn
// as noise).
type answer struct {
	Path      string `json:"path"`
	RequestID string `json:"requestId"`
	ServedAt  string `json:"servedAt"`
	Items     []item `json:"items"`
}

type item struct {
	ID    int     `json:"id"`
	Name  string  `json:"name"`
	Price float64 `json:"price"`
}

// bodyOf is the body of the n-th answer of an instance to path; changed
// alters one field of the items (the fault differ5).
func bodyOf(path string, n int64, changed bool) []byte {
	a := answer{Path: path, RequestID: fmt.Sprintf("%016x-%d", rand.Uint64(), n), ServedAt: time.Now().UTC().Format(time.RFC3339Nano)}
	for i := range 12 {
		a.Items = append(a.Items, item{ID: 1000 + i, Name: strings.Repeat(string(rune('a'+i)), 40) + path, Price: float64(100*i) + 0.5})
	}
	if changed {
		a.Items[3].Price++
	}
	b, err := json.Marshal(a)
	if err != nil {
		panic(err) // the program's own values
	}
	return b
}

// Header names of the answer.
const (
	headerInstanceKind = "Instance-Kind" // the kind of the instance that answered
	headerRequestKind  = "Request-Kind"  // the kind of request it read (the gray header)
)

func kindName(gray bool) string {
	if gray {
		return graylb.Gray.String()
	}
	return graylb.Prod.String()
}
