package grpcctx

import (
	"encoding/json"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/serviceconfig"
	"google.golang.org/grpc/status"
)

// ServiceConfig selects the graylb balancer.
const ServiceConfig = `{"loadBalancingConfig":[{"` + Name + `":{}}]}`

// DefaultFailureCodes are the status codes that count as a failure of the
// instance that answered, for outlier detection and latency-aware
// policies: exactly those that adapter.GRPCResult reads as failed, the
// codes that stand for an HTTP 5xx other than 501 and 504 (Unavailable
// 503; Internal, Unknown, DataLoss 500), so that an instance's answers
// count as they do over every adapter (adapter.HTTPResult). Not failures:
// DeadlineExceeded the server sent (504: a timeout of its own; it answered,
// and the picker reads it as adapter.DeadlineAnswered), Unimplemented
// (501: the caller asked for what the build does not serve),
// ResourceExhausted (429) and every other 4xx-like code. A code beyond
// those gRPC defines counts as Unknown does, in this set or a configured
// one.
var DefaultFailureCodes = []codes.Code{codes.Unavailable, codes.Internal, codes.Unknown, codes.DataLoss}

var defaultFailureCodes = newFailureSet(DefaultFailureCodes)

// failureSet is a set of status codes, by code.
type failureSet [codes.Unauthenticated + 1]bool

func newFailureSet(list []codes.Code) failureSet {
	var s failureSet
	for _, c := range list {
		if int(c) < len(s) {
			s[c] = true
		}
	}
	return s
}

// failed reports whether a call that ended with err counts against its
// instance.
func (s *failureSet) failed(err error) bool {
	if err == nil {
		return false
	}
	c := status.Code(err)
	if int(c) >= len(s) {
		c = codes.Unknown
	}
	return s[c]
}

// lbConfig is the balancer's configuration in the service config:
// {"graylb":{"failureCodes":["UNAVAILABLE",13]}}, codes by name as gRPC
// spells them or by number.
type lbConfig struct {
	serviceconfig.LoadBalancingConfig `json:"-"`
	FailureCodes                      []json.RawMessage `json:"failureCodes"`
	set                               failureSet
}

// ParseConfig reads the balancer's configuration; unknown code names are
// refused.
func (builder) ParseConfig(js json.RawMessage) (serviceconfig.LoadBalancingConfig, error) {
	cfg := &lbConfig{}
	if len(js) > 0 {
		if err := json.Unmarshal(js, cfg); err != nil {
			return nil, fmt.Errorf("grpcctx: balancer config: %w", err)
		}
	}
	if cfg.FailureCodes == nil {
		cfg.set = defaultFailureCodes
		return cfg, nil
	}
	list := make([]codes.Code, 0, len(cfg.FailureCodes))
	for _, n := range cfg.FailureCodes {
		var c codes.Code
		if err := c.UnmarshalJSON(n); err != nil {
			return nil, fmt.Errorf("grpcctx: balancer config: failure code %s: %w", n, err)
		}
		list = append(list, c)
	}
	cfg.set = newFailureSet(list)
	return cfg, nil
}

// ServiceConfigWithFailureCodes returns ServiceConfig with the status codes
// that count as an instance's failure (instead of DefaultFailureCodes), for
// grpc.WithDefaultServiceConfig after DialOptions.
func ServiceConfigWithFailureCodes(list ...codes.Code) string {
	nums := make([]uint32, len(list))
	for i, c := range list {
		nums[i] = uint32(c)
	}
	b, _ := json.Marshal(map[string]any{"loadBalancingConfig": []any{map[string]any{Name: map[string]any{"failureCodes": nums}}}})
	return string(b)
}
