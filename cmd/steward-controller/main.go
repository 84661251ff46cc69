// Command steward-controller is the controller: what agents talk to. It
// holds no authority of its own; see package controller.
//
//	steward-controller keys init --dir DIR
//	steward-controller serve --config FILE
//	steward-controller mcp --socket PATH
//	steward-controller attempts list --config FILE [--json]
//	steward-controller attempts inspect ID --config FILE
//	steward-controller attempts resolve ID --config FILE
//	steward-controller journal inspect --config FILE
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/stewardrt/steward/controller"
	"github.com/stewardrt/steward/systemd"
)

const usage = `usage:
  steward-controller keys init --dir DIR
  steward-controller serve --config FILE
  steward-controller mcp --socket PATH
  steward-controller attempts list --config FILE [--json]
  steward-controller attempts inspect ID --config FILE
  steward-controller attempts resolve ID --config FILE
  steward-controller journal inspect --config FILE
`

// errUsage makes the exit status 2.
var errUsage = errors.New("usage")

func main() {
	err := run(os.Args[1:])
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage), errors.Is(err, controller.ErrConfig), errors.Is(err, controller.ErrBinding):
		fmt.Fprintln(os.Stderr, "steward-controller:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "steward-controller:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 || args[0] == "--help" || args[0] == "-h" || args[0] == "help" {
		fmt.Fprint(os.Stdout, usage)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "keys":
		if len(rest) == 0 || rest[0] != "init" {
			return fmt.Errorf("%w: keys init --dir DIR", errUsage)
		}
		fs := newFlags("keys init")
		dir := fs.String("dir", "", "directory for the four role keys (0700)")
		if err := parse(fs, rest[1:], 0); err != nil {
			return err
		}
		pub, err := controller.InitKeys(*dir)
		if err != nil {
			return err
		}
		fmt.Println(pub)
		return nil
	case "serve":
		fs := newFlags("serve")
		cfg := fs.String("config", "", "the controller config (JSON)")
		if err := parse(fs, rest, 0); err != nil {
			return err
		}
		log := slog.New(slog.NewTextHandler(os.Stderr, nil))
		// Under systemd the three sockets come from the .socket units;
		// otherwise the map is empty and Serve binds them itself.
		ls, err := systemd.Listeners()
		if err != nil {
			return err
		}
		return controller.Serve(ctx, *cfg, controller.Options{
			Logger:    log,
			Listeners: ls,
			Ready: func() {
				if err := systemd.Ready("STATUS=serving"); err != nil {
					log.Warn("sd_notify READY", "err", err)
				}
			},
			Watchdog: func(health func() error) {
				if _, err := systemd.StartWatchdog(ctx, health); err != nil {
					log.Warn("sd_notify watchdog", "err", err)
				}
				context.AfterFunc(ctx, func() { systemd.Stopping() })
			},
		})
	case "mcp":
		fs := newFlags("mcp")
		sock := fs.String("socket", "", "the controller's MCP socket")
		if err := parse(fs, rest, 0); err != nil {
			return err
		}
		return controller.RunProxy(ctx, *sock, os.Stdin, os.Stdout)
	case "attempts":
		return attempts(ctx, rest)
	case "journal":
		if len(rest) == 0 || rest[0] != "inspect" {
			return fmt.Errorf("%w: journal inspect --config FILE", errUsage)
		}
		fs := newFlags("journal inspect")
		cfg := fs.String("config", "", "the controller config (JSON)")
		if err := parse(fs, rest[1:], 0); err != nil {
			return err
		}
		s, err := controller.InspectJournal(*cfg)
		if err != nil {
			return err
		}
		return printJSON(s)
	default:
		return fmt.Errorf("%w: unknown command %q\n%s", errUsage, cmd, usage)
	}
}

func attempts(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: attempts list|inspect|resolve", errUsage)
	}
	sub := args[0]
	fs := newFlags("attempts " + sub)
	cfg := fs.String("config", "", "the controller config (JSON)")
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	switch sub {
	case "list":
		asJSON := fs.Bool("json", false, "print JSON")
		if err := parse(fs, args[1:], 0); err != nil {
			return err
		}
		list, err := controller.ListAttempts(*cfg)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(list)
		}
		if len(list) == 0 {
			fmt.Println("no uncertain attempts")
		}
		for _, a := range list {
			fmt.Printf("%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.State, a.Tool, a.Application, a.RequestID, a.Detail)
		}
		return nil
	case "inspect", "resolve":
		id, rest := "", args[1:]
		if len(rest) > 0 && rest[0] != "" && rest[0][0] != '-' {
			id, rest = rest[0], rest[1:]
		}
		if err := parse(fs, rest, 0); err != nil {
			return err
		}
		if id == "" {
			return fmt.Errorf("%w: attempts %s ID --config FILE", errUsage, sub)
		}
		var ins controller.Inspection
		var err error
		if sub == "inspect" {
			ins, err = controller.InspectAttempt(ctx, *cfg, id, log)
		} else {
			ins, err = controller.ResolveAttempt(ctx, *cfg, id, log)
		}
		if err != nil {
			return err
		}
		return printJSON(ins)
	default:
		return fmt.Errorf("%w: attempts list|inspect|resolve", errUsage)
	}
}

func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("steward-controller "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parse parses flags, printing help for --help, and refuses stray
// arguments and missing required string flags.
func parse(fs *flag.FlagSet, args []string, nargs int) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(os.Stdout)
			fmt.Fprintf(os.Stdout, "usage of %s:\n", fs.Name())
			fs.PrintDefaults()
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() != nargs {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	var missing error
	fs.VisitAll(func(f *flag.Flag) {
		if g, ok := f.Value.(flag.Getter); ok {
			if s, ok := g.Get().(string); ok && s == "" && missing == nil {
				missing = fmt.Errorf("%w: --%s is required", errUsage, f.Name)
			}
		}
	})
	return missing
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
