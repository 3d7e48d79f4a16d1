// Package kafkagray carries graylb's full-link gray through Apache Kafka,
// on github.com/twmb/franz-go: a record produced while a request is served
// carries the request's routing state in its headers, the handler of a
// consumed record gets that state back on its context, and records of each
// kind reach consumers of that kind.
//
// One Link per service, made from its LoadBalancer:
//
//	link, _ := kafkagray.New(lb) // consumers of lb's kind (graylb.WithSelfGray)
//	cl, _ := kgo.NewClient(append(link.ClientOpts(),
//		kgo.SeedBrokers(addr), kgo.ConsumerGroup("orders"), kgo.ConsumeTopics("orders"))...)
//	defer link.Follow(cl)()
//
// Producing: [Link.Stamp] (or [Link.Produce]) writes on a record the keys
// the request served with ctx carries (gray, user, version, a match
// rule's keys), as they were admitted, and the kind the LoadBalancer
// decided when it did not travel on a key (rules, the canary, the
// service's own flag). A record produced outside any request is prod
// unless the producer's context or its LoadBalancer's own flag says gray.
//
// Consuming: [Link.Context] admits a record's headers as a server side
// admits an incoming call's (package adapter): the context it returns
// carries the record's routing state, so the HTTP, gRPC and Kafka calls
// the handler makes keep the record's kind. [Untrusted] makes every
// routing key of every record dropped (a topic external producers write).
//
// Seeing consumers: [Link.HandleErr] (and [Link.Handle]) count each
// record handled by its kind and outcome, shown by [Link.State] with this
// member's partitions and each topic's gray partitions at the last
// rebalance, and reported to a [RecordObserver] (WithRecordObserver; the
// otelgraylb module's RecordObserver exports them as a metric).
// [WithGroup] names the group and topics, and [Link.Metadata] gives the
// registration metadata (MetaGroup, MetaTopics, MetaKind,
// MetaGrayPartitions) by which graylb status lists a service's consumers.
//
// Consuming by kind: a topic's last N partitions (WithGrayPartitions,
// default 1) are its gray partitions. [Link.Partitioner] sends a gray
// record to a gray partition and a prod record to a prod partition, by
// key within a kind (round robin for records without a key).
// [Link.Balancer], a kgo.GroupBalancer that every member of the group must
// use, assigns prod partitions only to prod members, and gray partitions
// to gray members when one is alive and the rules are not closed, else to
// prod members. The partition only places a record; its kind decides who
// handles it, whatever produced it (a plain client, Spring Kafka): Handle
// and HandleErr produce a record of the other kind again, with the client
// given to Follow, to a partition of its kind, instead of handing it over
// (a prod record on a gray consumer; a gray record on a prod consumer
// while a gray one is alive). On an Untrusted topic every record is prod.
// Members announce their kind and whether their rules are closed in the
// group protocol's user data; a member whose rules open or close rejoins
// ([Link.Follow]), so the group rebalances. Offsets stay per partition in
// one group: a gray partition handed from a gray member that
// left or died to prod continues from its last committed offset, so
// nothing is lost; records processed but not committed are delivered
// again (at least once).
//
// What it costs: ordering per key holds within a kind only (a key's gray
// and prod records are on different partitions); gray partitions sit idle
// when no gray traffic flows; a topic must have more partitions than its
// gray partitions (one that does not has none: all its records are prod);
// every member of a group must run this balancer (a member announcing only
// another protocol cannot join the group). Rules set enabled: false leave
// the assignment by kind as it is: prod records never reach a gray
// consumer.
package kafkagray
