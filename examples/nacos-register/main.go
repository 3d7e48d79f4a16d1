// Command nacos-register registers a service instance in Nacos with its
// gray and version metadata taken from the environment, as a CI pipeline
// deploys a gray build (the pipeline sets GRAYLB_GRAY for gray builds only):
//
//	GRAYLB_GRAY=true GRAYLB_VERSION=v2 go run ./nacos-register -service user-service -port 8081
//
// It serves a small HTTP endpoint until SIGINT or SIGTERM, then stops
// gracefully: it deregisters, keeps serving while clients see the
// deregistration (-drain, default nacos.DefaultDrainWait) and until its
// callers stop calling (callers that cache lists, as Spring Cloud
// LoadBalancer does for 35 s, keep calling until their cache expires), and
// only then shuts its server down, letting requests in flight finish.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/httpctx"
	"github.com/graylb/graylb/nacos"
)

func main() {
	flag.Usage = usage
	service := flag.String("service", "user-service", "service name")
	host := flag.String("host", "127.0.0.1", "address to register")
	port := flag.Int("port", 0, "port to listen on and register (0: any free port)")
	server := flag.String("nacos", envOr("GRAYLB_NACOS_ADDR", "127.0.0.1:8848"), "Nacos server host:port")
	drain := flag.Duration("drain", nacos.DefaultDrainWait, "how long to keep serving after deregistering, while clients see it")
	flag.Parse()

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	if err := run(*service, *host, *port, stop, os.Stdout, nacos.WithServers(*server), nacos.WithDrainWait(*drain)); err != nil {
		fmt.Fprintln(os.Stderr, "nacos-register:", err)
		os.Exit(1)
	}
}

// shutdownTimeout bounds the wait for requests in flight once the drain
// wait is over.
const shutdownTimeout = 10 * time.Second

// deregisterTimeout bounds the deregistration (a restarting Nacos is
// waited for until then) and the drain after it: longer than
// nacos.DefaultDrainMax, for callers that cache lists 35 s. Give the
// process that much to stop (Kubernetes: terminationGracePeriodSeconds:
// 60 or more, with shutdownTimeout). A -drain longer than it is cut short.
const deregisterTimeout = 60 * time.Second

// run listens on host:port, registers the instance with opts, serves
// until stop receives, then deregisters, waits for clients to see it, and
// shuts the server down.
func run(service, host string, port int, stop <-chan os.Signal, out io.Writer, opts ...nacos.Option) error {
	lis, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return err
	}
	p := lis.Addr().(*net.TCPAddr).Port
	// Its LoadBalancer says the process's kind and keys once, and sees its
	// callers: the registration writes the one and drains the other.
	lb, err := graylb.New(graylb.NewRegistry(), graylb.WithSelfGray(nacos.GrayFromEnv()))
	if err != nil {
		lis.Close()
		return err
	}
	defer lb.Close()
	reg, err := nacos.Register(context.Background(), nacos.Service{Name: service, Host: host, Port: p}, append(opts, nacos.WithLoadBalancer(lb))...)
	if err != nil {
		lis.Close()
		return err
	}
	defer reg.Close()
	fmt.Fprintf(out, "registered %s at %s with metadata %v (%s, %s from the environment)\n",
		service, reg.Instance.Addr(), reg.Instance.Metadata, nacos.EnvGray, nacos.EnvVersion)

	srv := &http.Server{Handler: httpctx.Middleware(lb)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s gray=%s\n", service, reg.Instance.Addr(), reg.Instance.Metadata["gray"])
	}))}
	go srv.Serve(lis)
	<-stop
	fmt.Fprintln(out, "deregistering; serving on until callers stop")
	dctx, dcancel := context.WithTimeout(context.Background(), deregisterTimeout)
	defer dcancel()
	if err := reg.Deregister(dctx); err != nil {
		fmt.Fprintln(out, err) // stop all the same
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	return srv.Shutdown(ctx)
}

func usage() {
	fmt.Fprintf(flag.CommandLine.Output(), `Usage: nacos-register [flags]

Registers one instance of a service in Nacos and answers HTTP on its port with
its name and gray flag until Ctrl-C (or SIGTERM), then deregisters. Its metadata
comes from the environment, as a deployment pipeline sets it:
  %s=true   registers a gray instance (anything else: prod)
  %s=v2  its version
It has no LoadBalancer and no debug page: look at the registry through the
debug page of a program that routes to it (go run ./http -nacos ... -register=false).

Flags:
`, nacos.EnvGray, nacos.EnvVersion)
	flag.PrintDefaults()
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
