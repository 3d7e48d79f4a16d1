// Package e2etest runs the graylb command's rollout end to end against
// callers built on the frameworks graylb drops into: Kratos services and
// go-zero clients, whose calls reach Prometheus through otelgraylb's
// CallObserver metrics. It is a module of its own so that the command's
// module does not require Kratos, go-zero or their Go version. It has
// tests only.
package e2etest
