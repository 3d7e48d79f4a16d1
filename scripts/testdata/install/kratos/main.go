// A user's program on the kratos module: Kratos HTTP servers registered
// through the Registrar, a Kratos client over the Discovery picked by
// graylb's selector; a gray and a prod request each reach their kind.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	klog "github.com/go-kratos/kratos/v2/log"
	"github.com/go-kratos/kratos/v2/registry"
	"github.com/go-kratos/kratos/v2/selector"
	khttp "github.com/go-kratos/kratos/v2/transport/http"
	"github.com/graylb/graylb"
	graylbkratos "github.com/graylb/graylb/kratos"
)

func main() {
	klog.SetLogger(klog.NewStdLogger(io.Discard))
	ctx := context.Background()
	reg := graylb.NewRegistry()
	lb, err := graylb.New(reg)
	if err != nil {
		fail(err)
	}
	defer lb.Close()
	selector.SetGlobalSelector(graylbkratos.NewBuilder(lb))
	registrar := graylbkratos.NewRegistrar(reg)
	for _, kind := range []string{"prod", "gray"} {
		srv := khttp.NewServer(khttp.Address("127.0.0.1:0"), khttp.Middleware(graylbkratos.Server(lb)))
		srv.Route("/").GET("/who", func(c khttp.Context) error { return c.Result(200, map[string]string{"kind": kind}) })
		u, err := srv.Endpoint()
		if err != nil {
			fail(err)
		}
		go srv.Start(ctx)
		defer srv.Stop(ctx)
		if err := registrar.Register(ctx, &registry.ServiceInstance{ID: kind, Name: "user",
			Metadata: map[string]string{"gray": fmt.Sprint(kind == "gray")}, Endpoints: []string{u.String()}}); err != nil {
			fail(err)
		}
	}
	client, err := khttp.NewClient(ctx, khttp.WithEndpoint("discovery:///user.http"),
		khttp.WithDiscovery(graylbkratos.NewDiscovery(reg)), khttp.WithMiddleware(graylbkratos.Client(lb)), khttp.WithBlock())
	if err != nil {
		fail(err)
	}
	defer client.Close()
	for gray, want := range map[string]string{"true": "gray", "false": "prod"} {
		var out struct{ Kind string }
		if err := client.Invoke(graylb.WithValue(ctx, "gray", gray), "GET", "/who", nil, &out); err != nil {
			fail(err)
		}
		if out.Kind != want {
			fail(fmt.Errorf("gray: %s went to %q, want %q", gray, out.Kind, want))
		}
	}
	fmt.Println("kratos: a gray and a prod request each reached their kind")
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
