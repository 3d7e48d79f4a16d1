package httpctx

import (
	"sync"
	"sync/atomic"

	"github.com/graylb/graylb"
)

// maxAddrs bounds an addrCache: past it the cache starts over, so its
// memory stays bounded whatever instances come and go.
const maxAddrs = 4096

// addrCache keeps the host:port strings of the instances a Transport
// sends to, so that a request does not format one (Instance.Addr costs
// two allocations). It is copy-on-write: a lookup takes no lock and writes
// nothing; an address not seen yet is formatted and added in a new map.
// The zero value is empty and ready.
type addrCache struct {
	m  atomic.Pointer[map[hostPort]string]
	mu sync.Mutex // serialises adding
}

type hostPort struct {
	host string
	port int
}

// of returns in.Addr().
func (c *addrCache) of(in graylb.Instance) string {
	if m := c.m.Load(); m != nil {
		if a, ok := (*m)[hostPort{in.Host, in.Port}]; ok {
			return a
		}
	}
	return c.add(in)
}

func (c *addrCache) add(in graylb.Instance) string {
	a := in.Addr()
	c.mu.Lock()
	defer c.mu.Unlock()
	var next map[hostPort]string
	if old := c.m.Load(); old != nil && len(*old) < maxAddrs {
		next = make(map[hostPort]string, len(*old)+1)
		for k, v := range *old {
			next[k] = v
		}
	} else {
		next = make(map[hostPort]string, 1)
	}
	next[hostPort{in.Host, in.Port}] = a
	c.m.Store(&next)
	return a
}
