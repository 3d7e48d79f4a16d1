package adaptertest

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/graylb/graylb"
)

// RunKeys runs the parts of Run about a call's keys: KeyCase, RenamedKeys,
// MatchKeysAndLanes and TrustBoundary. A carrier that is no transport of
// its own (W3C baggage, which otelgraylb reads) runs them through a
// transport's Driver whose calls carry their keys in it (InHeader), the
// option that makes a LoadBalancer read it in Driver.Options. NoOptions,
// which gives the LoadBalancer no option, and the parts about calls are
// the transport's own.
func RunKeys(t *testing.T, d Driver) {
	t.Helper()
	if d.Serve == nil || d.Dial == nil {
		t.Fatal("adaptertest: the Driver needs Serve and Dial")
	}
	t.Run("KeyCase", func(t *testing.T) { keyCase(t, &d) })
	t.Run("RenamedKeys", func(t *testing.T) { renamedKeys(t, &d) })
	t.Run("MatchKeysAndLanes", func(t *testing.T) { matchKeysAndLanes(t, &d) })
	t.Run("TrustBoundary", func(t *testing.T) { trustBoundary(t, &d) })
}

// InHeader returns d, for RunKeys, with the keys of its calls to servers
// carried as the members of one header (W3C baggage's "baggage") instead
// of under their own names:
//
//   - a Client of Dial for the "edge" service, whose server side admits
//     each call, sends every key with a value as a member of header, whose
//     value pack writes (the names as given, several spellings of one name
//     included); one for any other service sends the keys under their own
//     names, as the program's keys on the call a client side routes (a
//     carrier is read where a server side admits a call);
//   - an Answer reports the members of header a server received, read by
//     unpack, as keys it received (a value it already reports under the
//     name counts once), so what the suite checks a hop received covers
//     them;
//   - ServerOptions.Trusted and User read a member when the call carries no
//     key of the name.
//
// The Driver returned has no Direct and no Stream.
func InHeader(d Driver, header string, pack func(keys map[string]string) string, unpack func(value string) map[string]string) Driver {
	header = strings.ToLower(header)
	members := func(get func(string) string) func(string) string {
		return func(name string) string {
			if v := get(name); v != "" {
				return v
			}
			for k, v := range unpack(get(header)) {
				if strings.EqualFold(k, name) {
					return v
				}
			}
			return ""
		}
	}
	report := func(a *Answer) {
		for n := a; n != nil; n = n.Next {
			for _, v := range n.Keys[header] {
				for k, mv := range unpack(v) {
					k = strings.ToLower(k)
					if !contains(n.Keys[k], mv) {
						n.Keys[k] = append(n.Keys[k], mv)
					}
				}
			}
		}
	}
	serve, dial := d.Serve, d.Dial
	d.Serve = func(t *testing.T, lb *graylb.LoadBalancer, l net.Listener, o ServerOptions) {
		if trusted := o.Trusted; trusted != nil {
			o.Trusted = func(get func(string) string) bool { return trusted(members(get)) }
		}
		if user := o.User; user != nil {
			o.User = func(get func(string) string) string { return user(members(get)) }
		}
		serve(t, lb, l, o)
	}
	d.Dial = func(t *testing.T, reg *graylb.Registry, lb *graylb.LoadBalancer, service string) Client {
		c := dial(t, reg, lb, service)
		if service != "edge" {
			return c
		}
		return func(ctx context.Context, keys map[string]string) (Answer, error) {
			var carried map[string]string
			with := map[string]string{}
			for k, v := range keys {
				if v != "" {
					with[k] = v
				}
			}
			if len(with) > 0 {
				carried = map[string]string{header: pack(with)}
			}
			a, err := c(ctx, carried)
			report(&a)
			return a, err
		}
	}
	d.Direct, d.Stream = nil, nil
	if d.Name != "" {
		d.Name += " (keys in " + header + ")"
	}
	return d
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
