package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/graylb/graylb"
)

// runStatus is status; prom is Prometheus' base URL, for the shadow
// copies' live counts ("" when not given).
func runStatus(ctx context.Context, g *globals, e env, services []string, prom string) int {
	for _, s := range services {
		if err := graylb.ValidateServiceName(s); err != nil {
			fmt.Fprintf(e.stderr, "graylb status: %v\n", err)
			return exitUsage
		}
	}
	api, err := g.nacosAPI(e)
	if err != nil {
		return fail(e, err)
	}
	st, err := g.openStore(e)
	if err != nil {
		return fail(e, err)
	}
	defer st.close()
	rep := statusReport{RulesWhere: st.describe(), Warnings: []string{}}
	d, err := st.get(ctx)
	if err != nil {
		return fail(e, err)
	}
	if rep.Rules, err = parseStored(d); err != nil {
		rep.RulesError = err.Error()
		rep.Warnings = append(rep.Warnings, "the stored rules are refused by every client: each keeps the rules it had (or none, when it starts now); the kinds below are those of the zero rules")
	}
	rep.Rollout = rolloutOf(ctx, st)
	rep.Shadow = shadowOf(ctx, g, e, prom, services, rep.Rules.ShadowPercent)
	if len(services) == 0 {
		return listServices(ctx, g, e, api, rep)
	}
	if rep.Rules.Closed {
		rep.Warnings = append(rep.Warnings, "the rules are closed (rolled back): no request reaches a gray instance")
	}
	for _, svc := range services {
		list, err := api.instances(ctx, svc, g.group)
		if err != nil {
			return fail(e, err)
		}
		s, err := classify(ctx, svc, list, rep.Rules, g.grayKey, g.versionKey)
		if err != nil {
			return fail(e, err)
		}
		if len(list) == 0 {
			s.Warnings = append(s.Warnings, svc+": no instance registered (in group "+g.group+")")
		}
		rep.Services = append(rep.Services, s)
	}
	for _, a := range unmatchedAddresses(rep.Rules, rep.Services) {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("grayAddresses entry %q matches no instance of %s", a, strings.Join(services, ", ")))
	}
	if g.output == "json" {
		printJSON(e.stdout, rep)
	} else {
		printStatus(e.stdout, rep)
	}
	return exitOK
}

// rolloutStatus is the rollout lease as status shows it.
type rolloutStatus struct {
	Where string `json:"where"`
	// Running: a lease not past its expiry. A lease past it is shown too:
	// its holder stopped renewing it (it died, or lost the store).
	Running bool         `json:"running"`
	Lease   *leaseRecord `json:"lease,omitempty"`
	Error   string       `json:"error,omitempty"`
}

// rolloutOf reads the rollout lease beside the rules.
func rolloutOf(ctx context.Context, st store) *rolloutStatus {
	item := st.aux(leaseName)
	rs := &rolloutStatus{Where: item.describe()}
	rec, _, ok, err := readLease(ctx, item)
	switch {
	case err != nil:
		rs.Error = err.Error()
	case ok:
		rs.Lease, rs.Running = &rec, time.Now().Before(rec.Expires)
	}
	return rs
}

func printRollout(w io.Writer, rs *rolloutStatus) {
	switch {
	case rs == nil:
	case rs.Error != "":
		fmt.Fprintf(w, "rollout: unknown: %s\n", rs.Error)
	case rs.Lease == nil:
		fmt.Fprintln(w, "rollout: none running")
	case rs.Running:
		fmt.Fprintf(w, "rollout: RUNNING: %s; lease renewed %s, expires %s unless renewed\n", *rs.Lease,
			rs.Lease.Renewed.UTC().Format(time.RFC3339), rs.Lease.Expires.UTC().Format(time.RFC3339))
	default:
		fmt.Fprintf(w, "rollout: none running (%s stopped renewing its lease; it expired at %s)\n", *rs.Lease, rs.Lease.Expires.UTC().Format(time.RFC3339))
	}
}

// serviceSummary is one line of status without services.
type serviceSummary struct {
	Service   string `json:"service"`
	Instances int    `json:"instances"`
	Prod      int    `json:"prod"`      // routable prod instances
	Gray      int    `json:"gray"`      // routable gray instances
	NotRouted int    `json:"notRouted"` // unhealthy, disabled, zero weight or refused
}

// listServices is status without services: every service of the group,
// with its instances counted by kind (as kubectl get lists).
func listServices(ctx context.Context, g *globals, e env, api *nacosAPI, rep statusReport) int {
	names, total, err := api.services(ctx, g.group)
	if err != nil {
		return fail(e, err)
	}
	list := []serviceSummary{}
	for _, svc := range names {
		if graylb.ValidateServiceName(svc) != nil {
			continue
		}
		ins, err := api.instances(ctx, svc, g.group)
		if err != nil {
			return fail(e, err)
		}
		s, err := classify(ctx, svc, ins, rep.Rules, g.grayKey, g.versionKey)
		if err != nil {
			return fail(e, err)
		}
		list = append(list, serviceSummary{Service: svc, Instances: len(ins), Prod: s.Prod, Gray: s.Gray, NotRouted: len(ins) - s.Prod - s.Gray})
	}
	if g.output == "json" {
		printJSON(e.stdout, map[string]any{"rules": rep.Rules, "rulesWhere": rep.RulesWhere, "rulesError": rep.RulesError,
			"rollout": rep.Rollout, "shadow": rep.Shadow, "group": g.group, "services": list, "total": total})
		return exitOK
	}
	w := e.stdout
	fmt.Fprintf(w, "rules: %s\n", rep.RulesWhere)
	if rep.RulesError != "" {
		fmt.Fprintf(w, "  REFUSED by every client (they keep their previous rules): %s\n", rep.RulesError)
	} else {
		fmt.Fprintf(w, "  %s\n", rulesSummary(rep.Rules))
	}
	printRollout(w, rep.Rollout)
	printShadow(w, rep.Shadow)
	fmt.Fprintln(w)
	if len(list) == 0 {
		fmt.Fprintf(w, "No services registered in group %s.\n", printable(g.group))
		return exitOK
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tINSTANCES\tPROD\tGRAY\tNOT ROUTED")
	for _, s := range list {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\n", printable(s.Service), s.Instances, s.Prod, s.Gray, s.NotRouted)
	}
	tw.Flush()
	if total > len(names) {
		fmt.Fprintf(w, "(%d of %d services shown)\n", len(names), total)
	}
	if n := len(names) - len(list); n > 0 {
		fmt.Fprintf(w, "(%d service name(s) clients refuse not shown)\n", n)
	}
	return exitOK
}
