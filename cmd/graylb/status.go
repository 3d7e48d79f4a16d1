package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/graylb/graylb"
)

// instanceStatus is one registered instance as status shows it.
type instanceStatus struct {
	Addr    string  `json:"addr"`
	Kind    string  `json:"kind"`             // what the rules in force make of it: prod, gray
	GrayBy  string  `json:"grayBy,omitempty"` // metadata, address, metadata+address
	Version string  `json:"version"`
	Weight  float64 `json:"weight"`
	Healthy bool    `json:"healthy"`
	Enabled bool    `json:"enabled"`
	Cluster string  `json:"cluster"`
	// Serves are the subsets the instance is in (prod, gray, all) when it
	// is routable; empty when clients do not route to it.
	Serves []string `json:"serves"`
	// Invalid is why clients refuse the instance, when they do.
	Invalid string `json:"invalid,omitempty"`
}

// serviceStatus is one service as status shows it.
type serviceStatus struct {
	Service   string           `json:"service"`
	Instances []instanceStatus `json:"instances"`
	Prod      int              `json:"prod"` // routable prod instances
	Gray      int              `json:"gray"` // routable gray instances
	Warnings  []string         `json:"warnings"`
	// Consumers are the Kafka consumer groups its instances say they
	// consume in (their kafka.* metadata), with their instances by kind.
	Consumers []consumerGroupStatus `json:"consumers"`
	// matched are the gray address entries that match an instance.
	matched map[string]bool
}

// statusReport is what status prints.
type statusReport struct {
	Rules      graylb.Rules    `json:"rules"`
	RulesWhere string          `json:"rulesWhere"`
	RulesError string          `json:"rulesError,omitempty"`
	Warnings   []string        `json:"warnings"`
	Services   []serviceStatus `json:"services"`
	// Rollout is the rollout lease beside the rules.
	Rollout *rolloutStatus `json:"rollout,omitempty"`
	// Shadow is the shadow share and its live counts.
	Shadow *shadowStatus `json:"shadow,omitempty"`
}

// maxAttributedAddresses: with more gray address entries, status does not
// tell which entry made an instance gray (one routing table per entry).
const maxAttributedAddresses = 200

// classify returns what the rules make of a service's instances, by the
// library's own routing: the instances are put in an in-memory registry
// behind a LoadBalancer with the rules, and its Snapshot says each one's
// kind and subsets. Unhealthy, disabled and zero-weight instances are
// classified as if they were routable (clients skip them; status still
// says what they would be). grayKey and versionKey are the metadata keys.
func classify(ctx context.Context, service string, list []graylb.Instance, rules graylb.Rules, grayKey, versionKey string) (serviceStatus, error) {
	st := serviceStatus{Service: service, Warnings: []string{}, Instances: []instanceStatus{}, matched: map[string]bool{}}
	var routable []graylb.Instance
	for _, in := range list {
		is := instanceStatus{Addr: in.Addr(), Kind: "prod", Version: in.Metadata[versionKey], Weight: in.Weight,
			Healthy: in.Healthy, Enabled: in.Enabled, Cluster: in.Cluster, Serves: []string{}}
		if err := in.Validate(); err != nil {
			is.Invalid, is.Kind = err.Error(), "-"
		} else {
			routable = append(routable, in)
		}
		st.Instances = append(st.Instances, is)
	}
	full, err := snapshotKinds(ctx, service, routable, rules, grayKey, false)
	if err != nil {
		return st, err
	}
	byMeta := map[string]bool{}
	for _, in := range routable {
		if graylb.IsGray(in.Metadata[grayKey]) {
			byMeta[in.Addr()] = true
		}
	}
	// Which gray address entries match which instances.
	byAddr := map[string]bool{}
	if n := len(rules.GrayAddresses); n > 0 && n <= maxAttributedAddresses {
		for _, entry := range rules.GrayAddresses {
			one, err := snapshotKinds(ctx, service, routable, graylb.Rules{GrayAddresses: []string{entry}}, grayKey, true)
			if err != nil {
				return st, err
			}
			for addr, s := range one {
				if s.Kind == graylb.Gray {
					byAddr[addr], st.matched[entry] = true, true
				}
			}
		}
	} else if n > maxAttributedAddresses {
		all, err := snapshotKinds(ctx, service, routable, graylb.Rules{GrayAddresses: rules.GrayAddresses}, grayKey, true)
		if err != nil {
			return st, err
		}
		for addr, s := range all {
			if s.Kind == graylb.Gray {
				byAddr[addr] = true
			}
		}
		for _, entry := range rules.GrayAddresses { // not attributed: none reported unmatched
			st.matched[entry] = true
		}
	}
	usableGray := 0
	for i := range st.Instances {
		is := &st.Instances[i]
		s, ok := full[is.Addr]
		if !ok {
			continue
		}
		is.Kind = s.Kind.String()
		switch {
		case byMeta[is.Addr] && byAddr[is.Addr]:
			is.GrayBy = "metadata+address"
		case byMeta[is.Addr]:
			is.GrayBy = "metadata"
		case byAddr[is.Addr]:
			is.GrayBy = "address"
		}
		routed := is.Healthy && is.Enabled && is.Weight > 0
		if routed {
			is.Serves = s.Subsets
			if s.Kind == graylb.Gray {
				st.Gray++
				usableGray++
			} else {
				st.Prod++
			}
		}
	}
	st.Warnings = append(st.Warnings, reachWarnings(service, st, rules, usableGray)...)
	cg, warn := consumerGroups(service, list, rules, grayKey)
	st.Consumers, st.Warnings = cg, append(st.Warnings, warn...)
	return st, nil
}

// reachWarnings says which requests can reach the service's gray
// instances, when that is likely not what the operator meant.
func reachWarnings(service string, st serviceStatus, rules graylb.Rules, usableGray int) []string {
	var w []string
	grayListed := 0
	for _, is := range st.Instances {
		if is.Kind == "gray" {
			grayListed++
		}
	}
	enabled := rules.Enabled == nil || *rules.Enabled
	steers := rules.CanaryPercent > 0 || len(rules.GrayUsers) > 0 || len(rules.Matches) > 0
	switch {
	case !enabled && grayListed > 0:
		w = append(w, fmt.Sprintf("%s: gray routing is off (enabled: false): its %d gray instance(s) serve every request, prod ones too", service, grayListed))
	case rules.Closed && usableGray > 0:
		w = append(w, fmt.Sprintf("%s: the rules are closed: no request reaches its %d gray instance(s) (graylb resume reopens them)", service, usableGray))
	case grayListed > 0 && usableGray == 0:
		w = append(w, fmt.Sprintf("%s: none of its %d gray instance(s) is healthy, enabled and weighted: gray requests fall back to every instance", service, grayListed))
	case usableGray > 0 && !steers && rules.ShadowPercent == 0:
		w = append(w, fmt.Sprintf("%s: no rule sends requests to its %d gray instance(s) (no canaryPercent, grayUsers or matches): only requests that carry the gray key reach them", service, usableGray))
	case grayListed == 0 && steers && enabled && !rules.Closed && len(st.Instances) > 0:
		w = append(w, fmt.Sprintf("%s: the rules send requests gray but it has no gray instance: they fall back to every instance", service))
	}
	if st.Prod == 0 && len(st.Instances) > 0 && enabled {
		w = append(w, fmt.Sprintf("%s: no routable prod instance (healthy, enabled, weight > 0)", service))
	}
	return w
}

// snapshotKinds routes list under rules with graylb's own LoadBalancer and
// returns each instance's state by address. noMeta drops the gray
// metadata first (to see what the addresses alone make gray).
func snapshotKinds(ctx context.Context, service string, list []graylb.Instance, rules graylb.Rules, grayKey string, noMeta bool) (map[string]graylb.InstanceState, error) {
	out := map[string]graylb.InstanceState{}
	if len(list) == 0 {
		return out, nil
	}
	reg := graylb.NewRegistry()
	for _, in := range list {
		in.Healthy, in.Enabled = true, true
		if !(in.Weight > 0) {
			in.Weight = 1
		}
		md := maps.Clone(in.Metadata)
		if noMeta {
			delete(md, grayKey)
		}
		in.Metadata = md
		if err := reg.Register(in); err != nil {
			return nil, fmt.Errorf("%s: %w", in.Addr(), err)
		}
	}
	lb, err := graylb.New(reg, graylb.WithRules(rules), graylb.WithGrayKey(grayKey))
	if err != nil {
		return nil, err
	}
	defer lb.Close()
	// A pick makes the LoadBalancer route the service (its outcome does
	// not matter: a closed rule set may leave nothing for it).
	_, _ = lb.Pick(ctx, service)
	snap, ok := lb.Snapshot(service)
	if !ok {
		return nil, fmt.Errorf("%s: graylb did not route the service", service)
	}
	for _, s := range snap.Instances {
		out[s.Addr] = s
	}
	return out, nil
}

// rulesSummary is one line about the rules in force.
func rulesSummary(r graylb.Rules) string {
	var parts []string
	if r.Enabled != nil && !*r.Enabled {
		parts = append(parts, "gray routing OFF")
	}
	if r.Closed {
		parts = append(parts, "CLOSED (rolled back)")
	}
	parts = append(parts, "canary "+strconv.FormatFloat(r.CanaryPercent, 'f', -1, 64)+"%")
	if r.ShadowPercent > 0 {
		parts = append(parts, "shadow "+strconv.FormatFloat(r.ShadowPercent, 'f', -1, 64)+"%")
	}
	parts = append(parts, fmt.Sprintf("%d gray user(s)", len(r.GrayUsers)))
	parts = append(parts, fmt.Sprintf("%d gray address(es)", len(r.GrayAddresses)))
	if len(r.Matches) > 0 {
		parts = append(parts, fmt.Sprintf("%d match rule(s)", len(r.Matches)))
	}
	return strings.Join(parts, ", ")
}

// printStatus writes the report as text.
func printStatus(w io.Writer, rep statusReport) {
	fmt.Fprintf(w, "rules: %s\n", rep.RulesWhere)
	if rep.RulesError != "" {
		fmt.Fprintf(w, "  REFUSED by every client (they keep their previous rules): %s\n", rep.RulesError)
	} else {
		fmt.Fprintf(w, "  %s\n", rulesSummary(rep.Rules))
	}
	printRollout(w, rep.Rollout)
	printShadow(w, rep.Shadow)
	for _, s := range rep.Services {
		fmt.Fprintf(w, "\nservice %s: %d prod, %d gray routable\n", s.Service, s.Prod, s.Gray)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ADDRESS\tKIND\tGRAY BY\tVERSION\tWEIGHT\tHEALTHY\tENABLED\tSERVES")
		for _, in := range s.Instances {
			serves := strings.Join(in.Serves, ",")
			if in.Invalid != "" {
				serves = "refused: " + in.Invalid
			} else if serves == "" {
				serves = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%t\t%t\t%s\n", in.Addr, in.Kind, orDash(in.GrayBy), orDash(printable(in.Version)),
				strconv.FormatFloat(in.Weight, 'f', -1, 64), in.Healthy, in.Enabled, serves)
		}
		tw.Flush()
		printConsumers(w, s.Consumers)
		for _, wn := range s.Warnings {
			fmt.Fprintf(w, "  WARNING: %s\n", wn)
		}
	}
	for _, wn := range rep.Warnings {
		fmt.Fprintf(w, "WARNING: %s\n", wn)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printable escapes registry text (untrusted) for a terminal.
func printable(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f }) < 0 && len(s) <= 64 {
		return s
	}
	q := strconv.Quote(s)
	if len(q) > 66 {
		q = q[:64] + "…"
	}
	return q
}

// unmatchedAddresses are the gray address entries that match no instance
// of any of the services.
func unmatchedAddresses(rules graylb.Rules, services []serviceStatus) []string {
	var out []string
	for _, e := range rules.GrayAddresses {
		hit := false
		for _, s := range services {
			hit = hit || s.matched[e]
		}
		if !hit && !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out
}
