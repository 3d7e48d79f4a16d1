package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
)

// TestOnce runs the one-shot mode: every gray value decides both hops.
func TestOnce(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), config{once: true}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
}

// TestServers starts the servers as the default mode does (on free ports)
// and checks what the printed grpcurl commands rely on: reflection lists
// the service, a call with gray: true is served gray, and the debug page
// answers.
func TestServers(t *testing.T) {
	d, err := start(config{front: "127.0.0.1:0", debug: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	conn, err := grpc.NewClient("passthrough:///"+d.front, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// grpcurl list: server reflection.
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx, grpc.WaitForReady(true))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	if !strings.Contains(strings.Join(names, ","), "grpc.testing.TestService") {
		t.Errorf("reflection lists %v", names)
	}

	// grpcurl -H 'gray: true' ... UnaryCall
	r, err := testgrpc.NewTestServiceClient(conn).UnaryCall(metadata.AppendToOutgoingContext(ctx, "gray", "true"), &testgrpc.SimpleRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.GetServerId(); got != "front → middle-gray → backend-gray" {
		t.Errorf("served by %q", got)
	}
	// As JSON (grpcurl prints the answer as JSON, escaping <, > and & as
	// encoding/json does) the hop chain reads as it is.
	if js, _ := json.Marshal(r.GetServerId()); string(js) != `"`+r.GetServerId()+`"` {
		t.Errorf("as JSON the hop chain reads %s", js)
	}

	hr, err := http.Get(d.debug + "?format=json")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(hr.Body)
	hr.Body.Close()
	if !strings.Contains(string(b), `"service": "middle-service"`) {
		t.Errorf("debug page: %s", b)
	}
}
