// Package interoptest runs graylb services in one Nacos registry with the
// Java services the seeds describe, built from interoptest/java (Spring
// Boot 3.5, Spring Cloud 2025.0, Spring Cloud Alibaba's Nacos discovery):
// seed 002's Spring Cloud Gateway (a gray header or a gray user), seed
// 001's Spring Cloud LoadBalancer rule (gray-tag, letter case counting),
// seed 000's filter chain, a plain Spring Cloud Alibaba service and a
// Spring Kafka producer and consumer. Chains run both ways (Go → Java → Go
// and Java → Go → Java) over every fixture, each seed's key names given to
// graylb by configuration only, and the deployment flows run across the
// languages under load: a Go instance's SIGTERM behind the Java entries
// (their lists cached 35 s, Spring's default), a Java service's graceful
// stop behind graylb, a promotion of a gray Go build.
//
// It is a module of its own: it needs the core and nacos together, a Java
// 17 runtime and Maven. Its tests skip without GRAYLB_NACOS_ADDR (a
// Nacos server's HTTP host:port), without java, and without the built
// jars (GRAYLB_INTEROP_JARS, or interoptest/java/*/target after
// `mvn -B package` there, which `make test` runs).
package interoptest
