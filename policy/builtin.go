package policy

import "github.com/graylb/graylb/internal/engine"

// RoundRobin returns the round-robin policy, the LoadBalancer's default:
// each candidate in turn, from a random starting point, weights ignored.
// Every candidate gets an even share of the picks. Picks made on several
// cores at once may each follow their own rotation (so they do not
// contend on one counter): the shares stay even, but the global order of
// turns is not kept; StrictRoundRobin keeps it.
func RoundRobin() Policy { return engine.RoundRobin() }

// StrictRoundRobin returns round robin over one shared counter, as
// grpc-go's round_robin and Spring Cloud LoadBalancer do: one global order
// of turns, at the cost of contention between cores picking at once.
// Weights are ignored.
func StrictRoundRobin() Policy { return engine.StrictRoundRobin() }

// Random returns the uniform random policy: every candidate equally
// likely, weights ignored. It keeps no shared state.
func Random() Policy { return engine.Random() }

// WeightedRoundRobin returns the smooth weighted round-robin policy: each
// candidate gets a share of the picks proportional to its weight
// (Instance.Weight, fractions included: 1 and 1.5 share 2 : 3), its turns
// spread evenly over a precomputed schedule. A weight of 0, below 0 or NaN
// gets nothing; if no weight is positive, it is plain round robin.
//
// Over whole cycles of the schedule every share is within 0.5 % (relative)
// of weight/total, except that every positive weight gets at least one
// slot in L = max(65536, 8n) for n candidates: a share below 1/L is raised
// to 1/L, and the others then lose up to z/L more for z raised shares.
// A pick is O(1) and allocation-free; the schedule takes at most
// 4 × (L + 24n) bytes.
func WeightedRoundRobin() Policy { return engine.WeightedRoundRobin() }

// P2C returns the power-of-two-choices policy with a peak-EWMA latency
// estimate: each pick draws two distinct candidates at random and takes
// the one of lower cost,
//
//	cost = (latency estimate + 1 µs) × (calls in flight + 1)
//
// read from their Stats. A slower result raises the estimate at once,
// faster ones lower it gradually, and it decays while the instance gets
// no results, so an instance that was slow is tried again; a failed call
// counts as at least 1 s, and a call its caller's deadline ended before an
// answer as a failure that took at least the time waited; an instance not
// measured yet costs little, so a new one is tried at once, but while two
// or more of its calls begun since its last result are in flight, its
// estimate is at least how long they have waited (an instance that never
// answers is priced by the age of its calls). The results come from the
// adapters (httpctx's Transport, grpcctx's balancer) or from package
// adapter's Call.End; with no results, P2C picks uniformly at random. A
// pick is O(1), takes no lock and does not allocate.
func P2C() Policy { return engine.P2C() }
