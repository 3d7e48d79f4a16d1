// Command http runs a gateway and a service with prod and gray instances
// over HTTP, and sends a few requests through the gateway. It uses Nacos
// when an address is given (-nacos or GRAYLB_NACOS_ADDR), else graylb's
// in-memory registry:
//
//	go run ./examples/http
//	make nacos-up && go run ./examples/http -nacos 127.0.0.1:8848
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/httpctx"
	"github.com/graylb/graylb/nacos"
)

func main() {
	addr := flag.String("nacos", os.Getenv("GRAYLB_NACOS_ADDR"), "Nacos server host:port (empty: in-memory registry)")
	flag.Parse()
	if err := run(*addr); err != nil {
		fmt.Fprintln(os.Stderr, "http example:", err)
		os.Exit(1)
	}
}

func run(nacosAddr string) error {
	var (
		supplier graylb.Supplier
		register func(name string, port int, gray bool) (func(), error)
	)
	if nacosAddr == "" {
		reg := graylb.NewRegistry()
		supplier = reg
		register = func(name string, port int, gray bool) (func(), error) {
			md := map[string]string{"gray": fmt.Sprint(gray)}
			return func() {}, reg.Register(graylb.NewInstance(name, "127.0.0.1", port, md))
		}
		fmt.Println("registry: in memory")
	} else {
		sup, err := nacos.NewSupplier(nacos.WithServers(nacosAddr))
		if err != nil {
			return err
		}
		defer sup.Close()
		supplier = sup
		register = func(name string, port int, gray bool) (func(), error) {
			r, err := nacos.Register(context.Background(), nacos.Service{Name: name, Host: "127.0.0.1", Port: port, Gray: &gray}, nacos.WithServers(nacosAddr))
			if err != nil {
				return nil, err
			}
			return func() { r.Close() }, nil
		}
		fmt.Println("registry: Nacos at", nacosAddr)
	}

	// Two instances of user-service: prod and gray.
	for _, gray := range []bool{false, true} {
		port, stop, err := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "user-service gray=%v (request gray header %q)", gray, r.Header.Get("gray"))
		}))
		if err != nil {
			return err
		}
		defer stop()
		dereg, err := register("user-service", port, gray)
		if err != nil {
			return err
		}
		defer dereg()
	}

	// The gateway: middleware keeps the incoming headers, the transport
	// routes http://user-service/ by them.
	lb, err := graylb.New(supplier, graylb.WithContextHandler(httpctx.Handler()))
	if err != nil {
		return err
	}
	defer lb.Close()
	client := &http.Client{Transport: httpctx.NewTransport(lb), Timeout: 5 * time.Second}
	gwPort, stop, err := serve(httpctx.Middleware(lb)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://user-service/", nil)
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		io.Copy(w, resp.Body)
	})))
	if err != nil {
		return err
	}
	defer stop()

	for _, gray := range []string{"", "true", "false"} {
		var body string
		// Nacos pushes new registrations within about a second.
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", gwPort), nil)
			if gray != "" {
				req.Header.Set("gray", gray)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			if resp.StatusCode == http.StatusOK && (gray != "true" || strings.HasPrefix(body, "user-service gray=true")) {
				break
			}
		}
		fmt.Printf("gray header %-7q -> %s\n", gray, body)
	}
	return nil
}

// serve starts h on a free loopback port.
func serve(h http.Handler) (int, func(), error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(lis)
	return lis.Addr().(*net.TCPAddr).Port, func() { srv.Close() }, nil
}
