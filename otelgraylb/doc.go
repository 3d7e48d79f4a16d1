// Package otelgraylb connects graylb to OpenTelemetry: metrics of what
// a LoadBalancer does, through the go.opentelemetry.io/otel/metric API,
// and the gray decision carried in W3C baggage across services that run
// OpenTelemetry propagation but not graylb.
//
// Metrics (nothing is measured unless you install them):
//
//	meter := provider.Meter(otelgraylb.ScopeName)
//	obs, _ := otelgraylb.Observer(meter)            // picks, on the pick path
//	lb, _ := graylb.New(reg, graylb.WithObserver(obs))
//	reg, _ := otelgraylb.Register(meter, lb)         // instances, cache, rules
//	defer reg.Unregister()
//
// Consumed Kafka records (the kafkagray module's Link takes the value as
// its record observer; neither module imports the other):
//
//	records, _ := otelgraylb.RecordObserver(meter)    // graylb.consumer.record.duration
//	link, _ := kafkagray.New(lb, kafkagray.WithGroup("billing", "orders"), kafkagray.WithRecordObserver(records))
//
// Baggage (opt-in on each side):
//
//	lb, _ := graylb.New(reg, graylb.WithContextHandler(httpctx.Handler(), otelgraylb.Handler()))
//	srv := otelgraylb.Middleware(lb, otelgraylb.WithTrusted(isInternal))(httpctx.Middleware(lb)(mux))
//	client := &http.Client{Transport: httpctx.NewTransport(lb, httpctx.WithBase(otelgraylb.NewTransport(lb, nil)))}
//
// The gRPC side lives in the grpcbaggage module beside this one.
package otelgraylb
