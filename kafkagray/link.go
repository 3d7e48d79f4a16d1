package kafkagray

import (
	"errors"
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
	gray      bool // this service's consumers are gray
	untrusted bool
	grayParts int32
	obs       RecordObserver
	group     string   // WithGroup
	topics    []string // WithGroup, sorted
	badGroup  error    // WithGroup's refusal, returned by New

	consumed [2][2]atomic.Uint64 // handled records: [prod, gray][ok, failed]

	mu         sync.Mutex // guards what the balancer saw at the last sync
	assignment *assignment
}

// Option configures a Link.
type Option func(*Link)

// WithGray says whether this process's consumers are gray: the flag the
// process registers with (gray=true in Nacos metadata). Default prod.
func WithGray(gray bool) Option { return func(l *Link) { l.gray = gray } }

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

// New returns the Link of lb. Errors wrap ErrNoLoadBalancer or
// ErrInvalidGroup.
func New(lb *graylb.LoadBalancer, opts ...Option) (*Link, error) {
	if lb == nil {
		return nil, ErrNoLoadBalancer
	}
	b := adapter.For(lb)
	l := &Link{b: b, adm: b.Admitter(), grayKey: b.Keys().Gray, grayParts: 1}
	for _, o := range opts {
		if o != nil {
			o(l)
		}
	}
	if l.badGroup != nil {
		return nil, l.badGroup
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
