// Package redisrules keeps graylb's gray rules in Redis: a graylb.RuleSource
// that reads them from a single server, a Sentinel-managed master or a
// Redis Cluster (any redis.UniversalClient) and follows their changes
// without a restart.
//
// # Layouts
//
// The three-key layout (the default, WithKeys to rename the keys) is the
// one of teams that run gray releases by writing Redis keys:
//
//	{graylb}:gray:switch     string  "true" (any letter case): gray routing on;
//	                                 anything else, or no key: off (every
//	                                 instance serves every request)
//	{graylb}:gray:users      list    gray user ids: their requests are gray
//	{graylb}:gray:addresses  list    host or host:port of the gray instances
//
// They map onto graylb.Rules as Enabled, GrayUsers and GrayAddresses; a
// missing list is an empty one. The braces are a Cluster hash tag: the three
// keys share one hash slot, so they are read in one transaction.
//
// The document layout (WithDocument) keeps graylb's JSON rule document in
// one key ({graylb}:rules by default), with the format and the validation of
// graylb.ParseRules; a missing key loads as the zero Rules.
//
// # Following changes
//
// Watch reads the keys in one round trip (MULTI/EXEC) every poll interval
// (DefaultPollInterval, 1s), so a change is in force within one interval;
// content equal to the last read calls nothing. When the server publishes
// keyspace notifications (its notify-keyspace-events setting holds K and
// the classes of the commands used), Watch also subscribes to the keys'
// channels and reads them at once on a change; polling goes on, because
// notifications sent while the subscription reconnects are lost. The
// RuleSource never changes the server's settings unless
// WithNotifications(NotifyEnable) says so.
//
// Only the node that executes a write publishes its keyspace event: on a
// Cluster, the master of the keys' slot, or, while the slot migrates, the
// node importing it. So on a Cluster Watch subscribes on every master that
// publishes the events (one connection each), and a change arrives by
// notification before, during and after a slot migration alike. The
// subscriptions follow the masters: when one breaks (a master died or failed
// over), when the client's slot map names another master for the keys, when
// a poll finds a change no notification announced, and while the keys' slot
// migrates (a notified deletion that left the keys unchanged: MIGRATE moved
// them, maybe to a master that held no slot yet), the slot map and the
// masters' settings are read again and new masters subscribed to. Through a
// Sentinel the subscription moves to the new master after a failover. Each
// time a subscription is made the keys are read again, so a change made
// meanwhile is not left to the next poll. The log says how changes are
// followed whenever that, or the node holding the keys, changes: "following
// changes by keyspace notifications" with the node, or "following changes by
// polling" with the reason (a new master whose notify-keyspace-events is
// empty, say); polling keeps the rules current meanwhile.
//
// # Failure and hostile content
//
// While Redis is down or unreachable the current rules (or the initial
// ones) stay in force; the outage is logged once and the recovery once.
// Content that does not make valid rules is refused with an error wrapping
// graylb.ErrInvalidRules that names the key, the previous rules stay in
// force, and it is logged once per distinct content: a document that
// graylb.ParseRules refuses, a list entry that is empty or not a host or
// host:port (a '/', a space, a CR or LF), a list longer than WithMaxEntries
// (DefaultMaxEntries) or lists holding more than graylb.MaxRulesSize bytes
// together, a document longer than graylb.MaxRulesSize (never transferred
// whole), a key of the wrong type. Errors from Redis itself wrap ErrRedis.
//
// # Security
//
// Credentials and TLS are the client's: build it with them (or pass
// redis.UniversalOptions to NewFromOptions); no log line or error of this
// package holds them. Whoever can write the keys decides the routing: keep
// write access to them as narrow as access to a deployment. A gray user id
// matches the user id the LoadBalancer reads from the request; at a trust
// boundary that id must come from the program (the authenticated user), not
// from a header an outside caller can set.
package redisrules
