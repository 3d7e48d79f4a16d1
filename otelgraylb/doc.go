// Package otelgraylb connects graylb to OpenTelemetry: metrics of what
// a LoadBalancer does, through the go.opentelemetry.io/otel/metric API,
// and W3C baggage as a carrier of routing keys like headers and metadata,
// for services that run OpenTelemetry propagation but not graylb.
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
// Baggage, read and written by every adapter under the LoadBalancer's
// trust boundary and key names, over HTTP, gRPC, Kratos, go-zero and
// Kafka:
//
//	lb, _ := graylb.New(reg, otelgraylb.WithBaggage())
package otelgraylb
