package nacos

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/graylb/graylb"
	"github.com/graylb/graylb/adapter"
)

// ErrMismatch: a registration would write a metadata key or a kind that
// the process's LoadBalancers do not read: callers keyed otherwise (a
// Java gateway on gray-tag, graylb's own clients) would take a gray build
// for prod. See WithLoadBalancer.
var ErrMismatch = errors.New("nacos: the registration disagrees with the process's LoadBalancer")

// GrayFromEnv reports whether the environment marks this process gray
// (EnvGray "true" in any letter case): the value to give
// graylb.WithSelfGray, so that the LoadBalancer, the registration
// (WithLoadBalancer) and the Kafka consumers (kafkagray) say the process's
// kind once.
func GrayFromEnv() bool { return graylb.IsGray(os.Getenv(EnvGray)) }

// identity is what a registration writes of the process: the metadata
// keys and its kind.
type identity struct {
	grayKey, versionKey string
	gray                bool
}

// identify settles the keys and kind svc registers with. With
// WithLoadBalancer they are the LoadBalancer's, and anything that says
// otherwise is refused. Without it, an unnamed gray key is the one every
// LoadBalancer of the process reads (the default when there is none), and
// a key none of them reads is refused; a kind that none of them has is
// logged.
func identify(svc Service, c *config) (identity, error) {
	env := os.Getenv(EnvGray)
	id := identity{grayKey: svc.GrayKey, versionKey: graylb.DefaultVersionKey, gray: graylb.IsGray(env)}
	if svc.Gray != nil {
		id.gray = *svc.Gray
	}
	if lb := c.lb; lb != nil {
		k := lb.Keys()
		if svc.GrayKey != "" && svc.GrayKey != k.GrayMetadata {
			return id, fmt.Errorf("%w: %s: Service.GrayKey %q, while the LoadBalancer reads the gray flag under %q (graylb.WithGrayKey)",
				ErrMismatch, svc.Name, svc.GrayKey, k.GrayMetadata)
		}
		id.grayKey, id.versionKey = k.GrayMetadata, k.VersionMetadata
		self := adapter.For(lb).SelfGray()
		switch {
		case svc.Gray != nil && *svc.Gray != self:
			return id, fmt.Errorf("%w: %s: Service.Gray is %s, while the LoadBalancer's own flag (graylb.WithSelfGray) is %s",
				ErrMismatch, svc.Name, kindName(*svc.Gray), kindName(self))
		case svc.Gray == nil && env != "" && graylb.IsGray(env) != self:
			return id, fmt.Errorf("%w: %s: %s=%q says %s, while the LoadBalancer's own flag (graylb.WithSelfGray) is %s: give it graylb.WithSelfGray(nacos.GrayFromEnv())",
				ErrMismatch, svc.Name, EnvGray, env, kindName(graylb.IsGray(env)), kindName(self))
		}
		id.gray = self
		return id, nil
	}
	var keys []string // the gray keys the process's LoadBalancers read
	var kinds [2]int  // how many are prod, gray
	for _, lb := range adapter.Live() {
		k := lb.Keys().GrayMetadata
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
		if adapter.For(lb).SelfGray() {
			kinds[1]++
		} else {
			kinds[0]++
		}
	}
	if id.grayKey == "" {
		switch len(keys) {
		case 0:
			id.grayKey = graylb.DefaultGrayKey
		case 1:
			id.grayKey = keys[0]
		default:
			return id, fmt.Errorf("%w: %s: the process's LoadBalancers read the gray flag under %s: name the one to register with nacos.WithLoadBalancer or Service.GrayKey",
				ErrMismatch, svc.Name, strings.Join(keys, ", "))
		}
	}
	if len(keys) > 0 && !slices.Contains(keys, id.grayKey) {
		return id, fmt.Errorf("%w: %s: registering the gray flag under %q, while the process's LoadBalancers read %s (graylb.WithGrayKey): pass nacos.WithLoadBalancer(lb)",
			ErrMismatch, svc.Name, id.grayKey, strings.Join(keys, ", "))
	}
	if n := kinds[0] + kinds[1]; n > 0 && kinds[boolIndex(id.gray)] == 0 {
		c.logger.Warn("nacos: registering a kind no LoadBalancer of the process has as its own flag: its calls that carry no kind go to the other one; pass nacos.WithLoadBalancer(lb) and graylb.WithSelfGray",
			"service", svc.Name, "registered", kindName(id.gray))
	}
	return id, nil
}

func kindName(gray bool) string {
	if gray {
		return "gray"
	}
	return "prod"
}

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}
