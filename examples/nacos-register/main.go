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
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/graylb/graylb/nacos"
)

func main() {
	service := flag.String("service", "user-service", "service name")
	host := flag.String("host", "127.0.0.1", "address to register")
	port := flag.Int("port", 0, "port to listen on and register (0: any free port)")
	server := flag.String("nacos", envOr("GRAYLB_NACOS_ADDR", "127.0.0.1:8848"), "Nacos server host:port")
	flag.Parse()

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	if err := run(*service, *host, *port, stop, os.Stdout, nacos.WithServers(*server)); err != nil {
		fmt.Fprintln(os.Stderr, "nacos-register:", err)
		os.Exit(1)
	}
}

// run listens on host:port, registers the instance with opts, serves
// until stop receives, then stops.
func run(service, host string, port int, stop <-chan os.Signal, out io.Writer, opts ...nacos.Option) error {
	lis, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return err
	}
	p := lis.Addr().(*net.TCPAddr).Port
	reg, err := nacos.Register(context.Background(), nacos.Service{Name: service, Host: host, Port: p}, opts...)
	if err != nil {
		lis.Close()
		return err
	}
	defer reg.Close()
	fmt.Fprintf(out, "registered %s at %s with metadata %v (%s, %s from the environment)\n",
		service, reg.Instance.Addr(), reg.Instance.Metadata, nacos.EnvGray, nacos.EnvVersion)

	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s gray=%s\n", service, reg.Instance.Addr(), reg.Instance.Metadata["gray"])
	})}
	go srv.Serve(lis)
	<-stop
	srv.Close()
	return nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
