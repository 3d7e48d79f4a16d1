// Package redisrules keeps graylb's gray rules in Redis: a graylb.RuleSource
// that reads them from a single server, a Sentinel-managed master or a
// Redis Cluster (any redis.UniversalClient) and follows their changes
// without a restart.
//
// The three-key layout (the default; WithKeys renames the keys) maps
// {graylb}:gray:switch, a string ("true" in any letter case: gray routing
// on; anything else, or no key: off), and the lists {graylb}:gray:users
// and {graylb}:gray:addresses (a missing list is empty) onto graylb.Rules'
// Enabled, GrayUsers and GrayAddresses; the braces, a Cluster hash tag, let
// one transaction read them. The document layout (WithDocument) keeps
// graylb's JSON rule document in one key, with graylb.ParseRules' format
// and validation; a missing key loads as the zero Rules.
//
// Watch reads the keys every poll interval (DefaultPollInterval), so a
// change is in force within one interval; when the server publishes
// keyspace notifications, it also follows them (on every master of a
// Cluster, through Sentinel failovers) and applies a change at once. It
// never changes the server's settings unless WithNotifications
// (NotifyEnable) says so. The log says how changes are followed.
//
// While Redis is unreachable the rules in force stay. Content that does not
// make valid rules (WithMaxEntries and graylb.MaxRulesSize bound it) is
// refused with an error wrapping graylb.ErrInvalidRules that names the key,
// and the rules in force stay; errors from Redis itself wrap ErrRedis.
// Credentials and TLS are the client's: no log line or error holds them.
// Whoever can write the keys decides the routing. docs/redis.md has the
// details.
package redisrules
