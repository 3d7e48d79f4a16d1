package grpcctx

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/graylb/graylb/shadow"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// ClientOption configures the client interceptors (DialOptions,
// UnaryClientInterceptor, StreamClientInterceptor).
type ClientOption func(*clientOptions)

type clientOptions struct {
	lb         *graylb.LoadBalancer
	mirror     *shadow.Mirror
	mirrorOpts []shadow.Option
}

// WithMirror configures the mirroring of idempotent methods (package
// shadow).
func WithMirror(opts ...shadow.Option) ClientOption {
	return func(o *clientOptions) { o.mirrorOpts = append(o.mirrorOpts, opts...) }
}

func newClientOptions(lb *graylb.LoadBalancer, opts []ClientOption) *clientOptions {
	o := &clientOptions{lb: lb}
	for _, f := range opts {
		if f != nil {
			f(o)
		}
	}
	o.mirror = shadow.NewMirror(lb, o.mirrorOpts...)
	return o
}

// Idempotent is a call option naming the methods (full names:
// "/pkg.Service/Method") that write nothing: their unary calls are
// mirrored to the gray build when the rules' ShadowPercent draws them, and
// a shadow copy may call them; a shadow copy's call of any other method
// fails with an error wrapping shadow.ErrWrite (unless shadow.AllowWrites).
// Give it per call, or to every call of a ClientConn with
// grpc.WithDefaultCallOptions (for go-zero: zrpc.WithDialOption of it).
func Idempotent(methods ...string) grpc.CallOption {
	o := idempotentOption{methods: map[string]bool{}}
	for _, m := range methods {
		o.methods[m] = true
	}
	return o
}

type idempotentOption struct {
	grpc.EmptyCallOption
	methods map[string]bool
}

// idempotent reports whether a call's options name method Idempotent.
func idempotent(method string, opts []grpc.CallOption) bool {
	for _, o := range opts {
		if io, ok := o.(idempotentOption); ok && io.methods[method] {
			return true
		}
	}
	return false
}

// serviceOf is the service a ClientConn dials (graylb:///svc), its target
// otherwise.
func serviceOf(cc *grpc.ClientConn) string {
	t := cc.Target()
	if i := strings.LastIndexByte(t, '/'); i >= 0 {
		return t[i+1:]
	}
	return t
}

// refuse is the error of a shadow copy's call of a method that may write,
// told to the shadow observers.
func (o *clientOptions) refuse(cc *grpc.ClientConn, method string) error {
	svc := serviceOf(cc)
	shadow.Refused(o.lb, svc, method)
	return &shadow.WriteError{Service: svc, Call: method}
}

// isGray reports whether a call's outgoing metadata (as outgoing wrote it)
// says gray.
func isGray(ctx context.Context, d *decisions) bool {
	v := metadata.ValueFromOutgoingContext(ctx, d.grayKey)
	return len(v) > 0 && graylb.IsGray(v[0])
}

// mirrored makes a drawn unary call of an idempotent method: the primary,
// as the call, and beside it a copy to the gray build (and a second prod
// call for a noise sample), whose answers the mirror compares.
func (o *clientOptions) mirrored(ctx, out context.Context, ab *adapter.Balancer, d *decisions, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts []grpc.CallOption) error {
	tk := o.mirror.Begin(serviceOf(cc), method)
	if tk == nil {
		return invoker(out, method, req, reply, cc, opts...)
	}
	creq := req
	if m, ok := req.(proto.Message); ok {
		creq = proto.Clone(m) // the caller may reuse req once the call returns
	}
	call := func(ctx context.Context, reply any) shadow.Answer {
		start := time.Now()
		err := invoker(outgoing(ctx, ab, d), method, creq, reply, cc, opts...)
		return o.answerOf(reply, err, time.Since(start))
	}
	go func() {
		var wg sync.WaitGroup
		if tk.WantsSecondProd() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(ab.SampleCopy(ctx), o.mirror.CopyTimeout())
				defer cancel()
				tk.Second(call(ctx, fresh(reply)))
			}()
		}
		cctx, cancel := context.WithTimeout(adapter.ShadowCopy(ctx), o.mirror.CopyTimeout())
		tk.Copy(call(cctx, fresh(reply)))
		cancel()
		wg.Wait()
	}()
	start := time.Now()
	err := invoker(out, method, req, reply, cc, opts...)
	tk.Primary(o.answerOf(reply, err, time.Since(start)))
	return err
}

// fresh returns a new message of reply's type.
func fresh(reply any) any {
	if m, ok := reply.(proto.Message); ok {
		return m.ProtoReflect().New().Interface()
	}
	return reflect.New(reflect.TypeOf(reply).Elem()).Interface()
}

// answerOf is a call's answer for a Ticket: its code, latency and reply as
// JSON (within the mirror's bound).
func (o *clientOptions) answerOf(reply any, err error, latency time.Duration) shadow.Answer {
	a := shadow.Answer{Status: int(status.Code(err)), Latency: latency}
	if err != nil {
		if _, ok := status.FromError(err); !ok {
			a.Err = err.Error()
		}
		return a
	}
	if m, ok := reply.(proto.Message); ok {
		if b, jerr := protojson.Marshal(m); jerr == nil && len(b) <= o.mirror.MaxBody() {
			a.Body = b
		}
	}
	return a
}
