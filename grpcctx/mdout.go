package grpcctx

import (
	"context"
	"slices"
	"sync"

	"google.golang.org/grpc/metadata"
)

// mdOut is a call's outgoing metadata as the Carrier Stamp writes: what
// Stamp sets goes on at once, in apply. A key the call carries already
// that Stamp sets or deletes (another spelling of the kind, an untrusted
// caller's key a proxy copied) has the metadata made again; a pair gRPC
// metadata cannot carry (CanCarry) is not set: the call would fail for it.
// Pooled: a call's Stamp allocates none.
type mdOut struct {
	ctx     context.Context
	d       *decisions
	kv      []string // names (lower case) and values set, in order
	buf     [8]string
	rewrite bool     // a key the call carries was set or deleted
	del     []string // names deleted
	absent  string   // the last name Get found the call not to carry
}

var mdOuts = sync.Pool{New: func() any { return new(mdOut) }}

func (m *mdOut) Get(name string) string {
	n := m.d.lower(name)
	for i := len(m.kv) - 2; i >= 0; i -= 2 {
		if m.kv[i] == n {
			return m.kv[i+1]
		}
	}
	if slices.Contains(m.del, n) {
		return ""
	}
	if v := metadata.ValueFromOutgoingContext(m.ctx, n); len(v) > 0 {
		return v[0]
	}
	m.absent = n
	return ""
}

// Value reads the call's keys as Get does, for Stamp's decision.
func (m *mdOut) Value(_ context.Context, name string) string { return m.Get(name) }

func (m *mdOut) Set(name, value string) {
	n := m.d.lower(name)
	if !CanCarry(n, value) {
		return
	}
	m.unset(n)
	m.kv = append(m.kv, n, value)
}

func (m *mdOut) Delete(name string) {
	n := m.d.lower(name)
	m.unset(n)
	if len(metadata.ValueFromOutgoingContext(m.ctx, n)) > 0 {
		m.del = append(m.del, n)
	}
}

// unset drops a pending pair of n; a key the call carries must then be
// made again.
func (m *mdOut) unset(n string) {
	for i := 0; i < len(m.kv); i += 2 {
		if m.kv[i] == n {
			m.kv = append(m.kv[:i], m.kv[i+2:]...)
			break
		}
	}
	if !m.rewrite && n != m.absent && len(metadata.ValueFromOutgoingContext(m.ctx, n)) > 0 {
		m.rewrite = true
	}
}

// apply returns the call's context with what was set and deleted.
func (m *mdOut) apply() context.Context {
	switch {
	case m.rewrite:
		md, _ := metadata.FromOutgoingContext(m.ctx) // a copy
		for _, n := range m.del {
			delete(md, n)
		}
		for i := 0; i < len(m.kv); i += 2 {
			md[m.kv[i]] = []string{m.kv[i+1]}
		}
		return metadata.NewOutgoingContext(m.ctx, md)
	case len(m.kv) == 0:
		return m.ctx
	}
	var dec decided
	for i := 0; i < len(m.kv); i += 2 {
		switch m.kv[i] {
		case m.d.grayKey:
			dec.gray = m.kv[i+1]
		case m.d.versionKey:
			dec.lane = m.kv[i+1]
		default:
			return metadata.AppendToOutgoingContext(m.ctx, m.kv...)
		}
	}
	return m.d.with(m.ctx, dec)
}
