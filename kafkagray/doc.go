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
// [Link.Stamp] (or [Link.Produce]) writes on a record the routing state of
// the request served with ctx, as adapter.Balancer.Stamp writes a call's.
// [Link.Context] (and [Link.Handle]) admits a record's headers as a server
// side admits an incoming call's, so the calls its handler makes keep the
// record's kind; [Untrusted] drops every routing key of every record.
// [Link.HandleErr] counts the records handled by kind and outcome
// ([Link.State], a [RecordObserver]), and [Link.Metadata] gives the
// registration metadata by which graylb status lists a service's consumers.
//
// [Link.Partitioner] puts gray records on a topic's gray partitions (its
// last WithGrayPartitions) and prod records on the others; [Link.Balancer],
// which every member of the group must use, assigns them by kind from the
// last committed offsets. A record's kind, not its partition, decides who
// handles it, whatever produced it: Handle produces a record of the other
// kind again (the client given to Follow) to a partition of its kind. A
// prod record never reaches a gray handler, and nothing is lost
// (docs/kafka.md).
package kafkagray
