// Package faulttest puts a real fault proxy (Toxiproxy) on each network
// link a graylb client has, one link at a time, under a steady request
// load, and measures what the faults cost: the link between the client
// and its HTTP instances (the httpctx Transport), between the client and
// Nacos (the nacos Supplier and RuleSource), and between the client and
// Redis (redisrules). The faults are a 2 s latency, a black hole (the
// timeout toxic with no timeout), a reset of every connection, a
// bandwidth of 1 KB/s, a slicer, and the link down.
//
// For each it counts the requests sent, the failed ones and those
// answered by an instance of the wrong kind, how long a change made
// while the fault lasted (a new instance in Nacos, a gray user in the
// rules) took to reach routing, and how long after the fault ended
// routing was current again. The targets: no request of the wrong kind,
// no failed idempotent request while a working instance of the kind
// exists, routing current within 2 s after the fault ends.
// TestFault_NacosAfterBackOff also takes the Nacos link down long enough
// for the Nacos SDK's reconnection back-off to outgrow that target, and
// ends the outage right after one of the SDK's attempts, the worst moment.
//
// It is a module of its own because it needs the core, nacos, redisrules
// and Toxiproxy's client together. Its tests skip without a Toxiproxy
// server (GRAYLB_TOXIPROXY_ADDR, host:port of its API; scripts/toxiproxy.sh
// starts one), the Nacos pair also without GRAYLB_NACOS_ADDR and under
// -race (the Nacos SDK races inside its RPC client), the Redis pair
// without redis-server. GRAYLB_FAULT_PLAN=long runs the long plan (faults
// of 20 s, the link down for 60 s); the short one, the default, keeps
// each fault a few seconds.
package faulttest
