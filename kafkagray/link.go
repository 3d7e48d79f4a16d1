package kafkagray

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrNoLoadBalancer is returned by New when it is given no LoadBalancer.
var ErrNoLoadBalancer = errors.New("kafkagray: no LoadBalancer")

// Link is one service's gray link through Kafka: what its producers write
// and its consumers admit, and the partitioner and group balancer that
// keep records of each kind on consumers of that kind. It is safe for
// concurrent use.
type Link struct {
	b         *adapter.Balancer
	adm       *adapter.Admitter
	grayKey   string
	gray      bool  // this service's consumers are gray: the LoadBalancer's own flag
	grayOpt   *bool // WithGray, checked against it
	logger    *slog.Logger
	untrusted bool
	grayParts int32
	obs       RecordObserver
	group     string   // WithGroup
	topics    []string // WithGroup, sorted
	badGroup  error    // WithGroup's refusal, returned by New

	consumed [2][2]atomic.Uint64 // handled records: [prod, gray][ok, failed]
	rerouted atomic.Uint64       // records produced again to a partition of their kind

	// cl is the client Follow was given: Handle produces records of the
	// other kind with it (reroute.go).
	cl      atomic.Pointer[kgo.Client]
	warnNoC sync.Once

	mu         sync.Mutex // guards what the balancer saw at the last sync
	assignment *assignment
	// grayTo says, per topic, whether the group's leader gave its gray
	// partitions to gray members at the last rebalance.
	grayTo atomic.Pointer[map[string]bool]
	// unsplit are topics too small for a gray partition, reported once.
	unsplit sync.Map
}

// Option configures a Link.
type Option func(*Link)

// ErrMismatch is returned (wrapped) by New when WithGray says another kind
// than the LoadBalancer's own flag.
var ErrMismatch = errors.New("kafkagray: the consumers' kind disagrees with the LoadBalancer's own flag")

// WithGray says whether this process's consumers are gray. The kind is the
// LoadBalancer's own flag (graylb.WithSelfGray), which the process's
// registration writes too (nacos.WithLoadBalancer): New refuses a WithGray
// that says otherwise (ErrMismatch).
func WithGray(gray bool) Option { return func(l *Link) { l.grayOpt = &gray } }

// WithLogger sets the logger of what the Link reports (default
// slog.Default()): topics with too few partitions for a gray one, records
// of the other kind it could not produce again.
func WithLogger(lg *slog.Logger) Option {
	return func(l *Link) {
		if lg != nil {
			l.logger = lg
		}
	}
}

// WithGrayPartitions sets how many of each topic's partitions, the last
// ones, hold gray records (default 1). Every producer and consumer of a
// topic must agree on it. n < 1 means 1.
func WithGrayPartitions(n int) Option {
	return func(l *Link) {
		if n < 1 {
			n = 1
		}
		l.grayParts = int32(n)
	}
}

// Untrusted declares the consumed topics outside the trust boundary
// (external producers write them): no routing key of a record is kept, in
// any letter case, and the calls its handler makes settle their kind as
// the rules decide for a request that carries none.
func Untrusted() Option { return func(l *Link) { l.untrusted = true } }

// New returns the Link of lb; its consumers' kind is lb's own flag
// (graylb.WithSelfGray). Errors wrap ErrNoLoadBalancer, ErrInvalidGroup or
// ErrMismatch.
func New(lb *graylb.LoadBalancer, opts ...Option) (*Link, error) {
	if lb == nil {
		return nil, ErrNoLoadBalancer
	}
	b := adapter.For(lb)
	l := &Link{b: b, adm: b.Admitter(), grayKey: b.Keys().Gray, grayParts: 1, gray: b.SelfGray(), logger: slog.Default()}
	for _, o := range opts {
		if o != nil {
			o(l)
		}
	}
	if l.badGroup != nil {
		return nil, l.badGroup
	}
	if l.grayOpt != nil && *l.grayOpt != l.gray {
		return nil, fmt.Errorf("%w: WithGray(%t), while the LoadBalancer's own flag (graylb.WithSelfGray) is %t", ErrMismatch, *l.grayOpt, l.gray)
	}
	return l, nil
}

// Gray reports whether this process's consumers are gray (WithGray).
func (l *Link) Gray() bool { return l.gray }

// ClientOpts returns the kgo options a producing and consuming client of
// the Link takes: the gray-aware partitioner and group balancer.
func (l *Link) ClientOpts() []kgo.Opt {
	return []kgo.Opt{kgo.RecordPartitioner(l.Partitioner()), kgo.Balancers(l.Balancer())}
}

// closed reports whether the rules in force are closed (the rollback
// lever): gray consumers then get no partition.
func (l *Link) closed() bool { return l.b.LoadBalancer().RulesState().Rules.Closed }

// grayPartitions returns how many of a topic's n partitions are gray:
// none when the topic has too few partitions to keep one for prod.
func (l *Link) grayPartitions(n int32) int32 {
	if n <= l.grayParts {
		return 0
	}
	return l.grayParts
}
