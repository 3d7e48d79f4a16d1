// Command nacos-register registers a service instance in Nacos with its
// gray and version metadata taken from the environment, as a CI pipeline
// deploys a gray build (the pipeline sets GRAYLB_GRAY for gray builds only):
//
//	GRAYLB_GRAY=true GRAYLB_VERSION=v2 go run ./nacos-register -service user-service -port 8081
//
// It serves a small HTTP endpoint until interrupted, then deregisters.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/graylb/graylb/nacos"
)

func main() {
	flag.Usage = usage
	service := flag.String("service", "user-service", "service name")
	host := flag.String("host", "127.0.0.1", "address to register")
	port := flag.Int("port", 0, "port to listen on and register (0: any free port)")
	server := flag.String("nacos", envOr("GRAYLB_NACOS_ADDR", "127.0.0.1:8848"), "Nacos server host:port")
	flag.Parse()

	lis, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		fail(err)
	}
	p := lis.Addr().(*net.TCPAddr).Port
	reg, err := nacos.Register(context.Background(), nacos.Service{Name: *service, Host: *host, Port: p}, nacos.WithServers(*server))
	if err != nil {
		fail(err)
	}
	defer reg.Close()
	fmt.Printf("registered %s at %s with metadata %v (%s, %s from the environment)\n",
		*service, reg.Instance.Addr(), reg.Instance.Metadata, nacos.EnvGray, nacos.EnvVersion)

	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s gray=%s\n", *service, reg.Instance.Addr(), reg.Instance.Metadata["gray"])
	})}
	go srv.Serve(lis)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	<-stop
	srv.Close()
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

func fail(err error) {
	fmt.Fprintln(os.Stderr, "nacos-register:", err)
	os.Exit(1)
}
