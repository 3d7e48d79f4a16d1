package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/graylb/graylb"
)

// Exit codes.
const (
	exitOK       = 0
	exitFailed   = 1 // the command failed (unreachable store, conflict, invalid rules)
	exitUsage    = 2 // bad flags or arguments
	exitRollback = 3 // rollout: gray was worse than prod and was rolled back
	exitNoData   = 4 // rollout: no verdict within --max-wait; the rules stay where they were
	exitSignal   = 130
)

// env is the command's world: its streams, its environment and its HTTP
// client.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	// http is the client for Nacos and Prometheus (its Timeout is replaced
	// by --timeout).
	http *http.Client
}

// Environment variables, each the default of a flag.
const (
	envNacos      = "GRAYLB_NACOS"           // --nacos
	envNamespace  = "GRAYLB_NACOS_NAMESPACE" // --namespace
	envGroup      = "GRAYLB_NACOS_GROUP"     // --group
	envDataID     = "GRAYLB_NACOS_DATA_ID"   // --data-id
	envUsername   = "GRAYLB_NACOS_USERNAME"  // (no flag: secrets stay out of process lists)
	envPassword   = "GRAYLB_NACOS_PASSWORD"  // (no flag)
	envRedis      = "GRAYLB_REDIS"           // --redis
	envRedisKey   = "GRAYLB_REDIS_KEY"       // --redis-key
	envRedisKeys  = "GRAYLB_REDIS_KEYS"      // --redis-keys
	envOutput     = "GRAYLB_OUTPUT"          // --output
	envPrometheus = "GRAYLB_PROMETHEUS"      // --prometheus
)

// command is one subcommand.
type command struct {
	name, args, short, long string
	// flags registers the command's own flags; run runs it.
	flags func(fs *flag.FlagSet)
	run   func(ctx context.Context, g *globals, e env, args []string) int
	// minArgs, maxArgs bound the positional arguments (maxArgs < 0: any).
	minArgs, maxArgs int
	subs             []*command
}

// parseInterleaved parses flags that may come before, between or after
// the positional arguments (as kubectl does); "--" ends the flags.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// run is the command line: graylb [FLAG...] COMMAND [ARG...] [FLAG...].
func run(ctx context.Context, args []string, e env) int {
	root := commands(e)
	return dispatch(ctx, root, "graylb", nil, args, e)
}

// dispatch runs command c (path names it) with args; pre are the global
// flags given before it (before a group's subcommand), passed on to the
// command that runs.
func dispatch(ctx context.Context, c *command, path string, pre, args []string, e env) int {
	if len(c.subs) > 0 {
		lead, rest, help, err := leadingGlobals(args, e)
		if err != nil {
			fmt.Fprintf(e.stderr, "%s: %v\n", path, err)
			usageOf(c, path, e.stderr)
			return exitUsage
		}
		pre, args = append(pre, lead...), rest
		if len(args) == 0 || help || args[0] == "help" {
			usageOf(c, path, e.stdout)
			if len(args) == 0 && !help {
				return exitUsage
			}
			return exitOK
		}
		for _, s := range c.subs {
			if s.name == args[0] {
				return dispatch(ctx, s, path+" "+s.name, pre, args[1:], e)
			}
		}
		fmt.Fprintf(e.stderr, "%s: unknown command %q\n", path, args[0])
		usageOf(c, path, e.stderr)
		return exitUsage
	}
	args = append(pre, args...)
	fs := flag.NewFlagSet(path, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var g globals
	g.register(fs, e)
	if c.flags != nil {
		c.flags(fs)
	}
	usage := func(out io.Writer) {
		fs.SetOutput(out)
		fmt.Fprintf(out, "Usage: %s %s\n\n%s\n", path, c.args, c.long)
		fmt.Fprintln(out, "\nFlags:")
		fs.PrintDefaults()
	}
	// The flag package calls Usage on -h and after a parse error's line:
	// the usage is printed below, once, on the stream it belongs to.
	fs.Usage = func() {}
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		usage(e.stdout)
		return exitOK
	}
	if err != nil {
		usage(e.stderr) // after the flag package's line naming the error
		return exitUsage
	}
	if len(pos) < c.minArgs || (c.maxArgs >= 0 && len(pos) > c.maxArgs) {
		fmt.Fprintf(e.stderr, "%s: wrong number of arguments (%d)\nUsage: %s %s\n", path, len(pos), path, c.args)
		return exitUsage
	}
	if err := g.check(); err != nil {
		fmt.Fprintf(e.stderr, "%s: %v\n", path, err)
		return exitUsage
	}
	return c.run(ctx, &g, e, pos)
}

// leadingGlobals takes the global flags (those every command takes) off
// the front of args, up to the first argument that is not a flag: they
// are returned as given, to be parsed by the command that runs. help is
// true when -h or --help is among them; "--" ends them. Any other flag
// there is an error: a command's own flags go after it.
func leadingGlobals(args []string, e env) (flags, rest []string, help bool, err error) {
	var g globals
	fs := flag.NewFlagSet("globals", flag.ContinueOnError)
	g.register(fs, e)
	for len(args) > 0 {
		a := args[0]
		if a == "--" {
			return flags, args[1:], help, nil
		}
		if len(a) < 2 || a[0] != '-' {
			break
		}
		name := strings.TrimPrefix(a[1:], "-")
		if name == "h" || name == "help" {
			help, args = true, args[1:]
			continue
		}
		name, _, hasValue := strings.Cut(name, "=")
		f := fs.Lookup(name)
		if f == nil {
			return nil, nil, false, fmt.Errorf("flag provided but not defined: -%s (before COMMAND only the flags every command takes; a command's own flags go after it)", name)
		}
		flags, args = append(flags, a), args[1:]
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); hasValue || (ok && b.IsBoolFlag()) {
			continue
		}
		if len(args) == 0 {
			return nil, nil, false, fmt.Errorf("flag needs an argument: -%s", name)
		}
		flags, args = append(flags, args[0]), args[1:]
	}
	return flags, args, help, nil
}

func usageOf(c *command, path string, w io.Writer) {
	fmt.Fprintf(w, "Usage: %s [FLAG...] COMMAND [ARG...] [FLAG...]\n\n%s\n\nCommands:\n", path, c.long)
	for _, s := range c.subs {
		fmt.Fprintf(w, "  %-16s %s\n", s.name, s.short)
	}
	var g globals
	fs := flag.NewFlagSet(path, flag.ContinueOnError)
	g.register(fs, env{getenv: func(string) string { return "" }})
	fmt.Fprintln(w, "\nFlags every command takes go before or after COMMAND; a command's own flags go after it:")
	line := " "
	fs.VisitAll(func(f *flag.Flag) {
		name := " --" + f.Name
		if len(f.Name) == 1 {
			name = " -" + f.Name
		}
		if len(line)+len(name) > 96 {
			fmt.Fprintln(w, line)
			line = " "
		}
		line += name
	})
	fmt.Fprintf(w, "%s\nRun '%s COMMAND --help' for a command's flags.\n", line, path)
}

func commands(e env) *command {
	var dryRun bool
	var shortcutOver func(ctx context.Context, g *globals, e env, change func(context.Context, store) (changeResult, error)) int
	dry := func(fs *flag.FlagSet) {
		fs.BoolVar(&dryRun, "dry-run", false, "show the change, write nothing")
	}
	shortcut := func(ctx context.Context, g *globals, e env, fn func(*graylb.Rules) error) int {
		return shortcutOver(ctx, g, e, func(ctx context.Context, st store) (changeResult, error) { return modify(ctx, st, dryRun, fn) })
	}
	shortcutOver = func(ctx context.Context, g *globals, e env, change func(context.Context, store) (changeResult, error)) int {
		st, err := g.openStore(e)
		if err != nil {
			return fail(e, err)
		}
		defer st.close()
		res, err := change(ctx, st)
		if err != nil && ctx.Err() != nil {
			return interruptedWrite(ctx, g, e, st, err)
		}
		if err != nil {
			return fail(e, err)
		}
		return printChange(g, e, res)
	}
	ro := &rolloutFlags{}
	var statusProm string
	return &command{
		name: "graylb",
		long: "graylb operates gray releases of services that balance with graylb: it shows what the\n" +
			"rules in force make of each instance, edits the rules with compare-and-set, and steps a\n" +
			"canary while comparing gray with prod (rollout).\n\n" +
			"The rules live in Nacos config (--nacos, --group, --data-id) or, with --redis, in Redis.",
		subs: []*command{
			{name: "status", args: "[SERVICE...]", short: "services and instances by kind, version, weight, health; a running rollout",
				long: "Without SERVICE, lists the services registered in the group with their instances counted by\n" +
					"kind (routable prod, routable gray, not routed), as kubectl get lists.\n" +
					"With SERVICE..., lists every instance of each with what the rules in force make of it (gray\n" +
					"by metadata or by address, the subsets it serves), and warnings: gray address entries that\n" +
					"match no instance, gray instances nothing reaches, closed rules.\n" +
					"Both show the rules and a running rollout (its lease: who, since when, which step), and the\n" +
					"shadow share (shadowPercent) with, given --prometheus, what the callers told of the shadow\n" +
					"copies in the last 5 minutes (graylb_shadow_total): same, differing, failed, dropped, writes\n" +
					"blocked.\n" +
					"Instances always come from Nacos; the rules from the store the flags choose.",
				maxArgs: -1,
				flags: func(fs *flag.FlagSet) {
					fs.StringVar(&statusProm, "prometheus", e.getenv(envPrometheus), "Prometheus base URL, for the shadow copies' live counts; empty: not read [$"+envPrometheus+"]")
				},
				run: func(ctx context.Context, g *globals, e env, args []string) int {
					return runStatus(ctx, g, e, args, statusProm)
				}},
			{name: "rules", short: "validate, get, diff or apply a rule document",
				long: "Reads and writes the rule document (graylb.Rules as JSON).",
				subs: []*command{
					{name: "validate", args: "FILE", short: "check a document with the clients' own parser",
						long:    "Parses FILE (- for standard input) exactly as every client does (graylb.ParseRules).\nExit status 0 when valid; otherwise 1 and the error naming the problem.",
						minArgs: 1, maxArgs: 1, run: runValidate},
					{name: "get", args: "", short: "print the rules in force",
						long:    "Prints the stored rule document (with --output json: the document, where it is, and its revision).",
						maxArgs: 0, run: runGet},
					{name: "diff", args: "FILE", short: "show what applying FILE would change",
						long:    "Validates FILE and prints a line diff from the stored document to it. Exit status 0 when\nequal, 1 when they differ (as diff(1)), 2 on trouble.",
						minArgs: 1, maxArgs: 1, run: runDiff},
					{name: "apply", args: "FILE", short: "validate FILE, show the diff, write it with compare-and-set",
						long: "Validates FILE (- for standard input), shows the diff from the stored document and writes\n" +
							"FILE with compare-and-set: when the document changed between the read and the write,\n" +
							"nothing is written and the command fails (run it again to see the new diff).",
						minArgs: 1, maxArgs: 1, flags: dry,
						run: func(ctx context.Context, g *globals, e env, args []string) int {
							return runApply(ctx, g, e, args, dryRun)
						}},
				}},
			{name: "canary", args: "PERCENT", short: "set canaryPercent (0-100, steps of 0.01)",
				long:    "Sets canaryPercent: that share of the requests nobody chose a side for goes gray.\nA read-modify-write with compare-and-set; other rules are kept.",
				minArgs: 1, maxArgs: 1, flags: dry,
				run: func(ctx context.Context, g *globals, e env, args []string) int {
					p, err := parsePercent(args[0])
					if err != nil {
						fmt.Fprintf(e.stderr, "graylb canary: %v\n", err)
						return exitUsage
					}
					return shortcut(ctx, g, e, setCanary(p))
				}},
			{name: "users", short: "add or remove gray users",
				long: "Adds user ids to grayUsers or removes them (their requests go gray whatever else says).",
				subs: []*command{
					{name: "add", args: "ID...", short: "add gray users", long: "Adds each ID to grayUsers (once).",
						minArgs: 1, maxArgs: -1, flags: dry,
						run: func(ctx context.Context, g *globals, e env, args []string) int {
							return shortcut(ctx, g, e, addUsers(args))
						}},
					{name: "rm", args: "ID...", short: "remove gray users", long: "Removes each ID from grayUsers (an ID not there is no error).",
						minArgs: 1, maxArgs: -1, flags: dry,
						run: func(ctx context.Context, g *globals, e env, args []string) int {
							return shortcut(ctx, g, e, removeUsers(args))
						}},
				}},
			{name: "rollback", args: "", short: "close the rules: no request reaches a gray instance",
				long:    "Sets closed: true, the rollback lever: gray requests go to prod. Other rules are kept, so\ngraylb resume restores them. A stored document every client refuses (they keep the rules\nthey had) is replaced by {\"closed\": true} alone; the diff shows the text replaced.",
				maxArgs: 0, flags: dry,
				run: func(ctx context.Context, g *globals, e env, _ []string) int {
					return shortcutOver(ctx, g, e, func(ctx context.Context, st store) (changeResult, error) { return closeRules(ctx, st, dryRun) })
				}},
			{name: "resume", args: "", short: "reopen closed rules",
				long:    "Sets closed: false: the rules route to gray instances again.",
				maxArgs: 0, flags: dry,
				run: func(ctx context.Context, g *globals, e env, _ []string) int {
					return shortcut(ctx, g, e, setClosed(false))
				}},
			{name: "rollout", args: "--service SERVICE [--steps 1,5,25,50,100] [--interval 5m]", short: "step the canary, judging gray against prod from Prometheus",
				long:    rolloutLong + "\n\n" + shadowLong,
				maxArgs: 0, flags: func(fs *flag.FlagSet) { ro.register(fs, e.getenv) },
				run: func(ctx context.Context, g *globals, e env, _ []string) int { return runRollout(ctx, g, e, ro) }},
		},
	}
}

func fail(e env, err error) int {
	fmt.Fprintf(e.stderr, "graylb: %v\n", err)
	return exitFailed
}

func printJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
