package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/stewardrt/steward/operator/admin"
	"github.com/stewardrt/steward/operator/views"
	"github.com/stewardrt/steward/wire/msg"
)

// The approvals verbs (DESIGN.md section 9, "Approvals"): a human lists,
// shows and answers asks, and follows them with watch. As the host's own
// account they reach the running host's admin socket (--store), as an
// approver the approvals socket (--socket, owned by --host-account).

// defaultHostAccount is the account an installed host runs as.
const defaultHostAccount = "steward-operator"

// approvalsFlags are the connection flags every approvals verb has.
type approvalsFlags struct {
	store, socket, hostAccount *string
}

func approvalsFlagSet(name string) (*flag.FlagSet, approvalsFlags) {
	fs, store := flags(name)
	return fs, approvalsFlags{
		store:       store,
		socket:      fs.String("socket", "", "the approvals socket `PATH` (an approver's own account; instead of --store)"),
		hostAccount: fs.String("host-account", defaultHostAccount, "the `ACCOUNT` that must own and serve --socket"),
	}
}

// open reaches the host: the approvals socket with --socket, else the
// store's admin socket, or the store itself when no host runs and live is
// false (watch follows a running host: holding the store's lock while it
// waited would keep the host from starting).
func (f approvalsFlags) open(ctx context.Context, live bool) (admin.Client, error) {
	switch {
	case *f.socket != "" && *f.store != "":
		return nil, fmt.Errorf("%w: give --store DIR (the host's account) or --socket PATH (an approver), not both", errUsage)
	case *f.socket != "":
		return admin.DialApprovals(ctx, *f.socket, *f.hostAccount)
	case *f.store == "":
		return nil, fmt.Errorf("%w: --store DIR or --socket PATH is required", errUsage)
	case live:
		a, err := admin.Dial(ctx, *f.store)
		if err != nil {
			return nil, fmt.Errorf("no running host answered on %s (watch follows a running host): %w", admin.SocketPath(*f.store), err)
		}
		return a, nil
	}
	return admin.Open(ctx, *f.store)
}

// do runs one approvals request within d.
func (f approvalsFlags) do(d time.Duration, req admin.Request) (*admin.ApprovalsReply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	a, err := f.open(ctx, false)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	return approvalsDo(a, d, req)
}

// list reads every page of a list (the host answers pages of at most
// msg.AsksPageBytes, each with the cursor of the next), on one connection,
// each page within 30 s. A cursor that does not move on ends it: a host
// never answers one, and the list must not loop.
func (f approvalsFlags) list(all bool) ([]msg.AskView, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := f.open(ctx, false)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	var asks []msg.AskView
	for after := uint64(0); ; {
		rep, err := approvalsDo(a, 30*time.Second, admin.Request{Op: admin.OpApprovalsList, Approvals: &admin.ApprovalsRequest{All: all, After: after}})
		if err != nil {
			return nil, err
		}
		asks = append(asks, rep.Asks...)
		if rep.Cursor == 0 || rep.Cursor <= after {
			return asks, nil
		}
		after = rep.Cursor
	}
}

// approvalsDo runs req on a, waiting at most d for a daemon's answer.
func approvalsDo(a admin.Client, d time.Duration, req admin.Request) (*admin.ApprovalsReply, error) {
	rep, err := a.DoWithin(d, req)
	if err != nil {
		return nil, err
	}
	if rep.Approvals == nil {
		return nil, fmt.Errorf("the host answered %s without its result", req.Op)
	}
	return rep.Approvals, nil
}

// askJSON is an ask as the approvals verbs print it: msg.AskView with its
// arguments as the JSON they are.
type askJSON struct {
	msg.AskView
	Arguments json.RawMessage `json:"arguments"`
}

func askOut(v msg.AskView) askJSON {
	a := askJSON{AskView: v, Arguments: json.RawMessage(v.Arguments)}
	if len(v.Arguments) == 0 || !json.Valid(v.Arguments) {
		a.Arguments = json.RawMessage("null")
	}
	return a
}

func (c *CLI) cmdApprovalsList(args []string) error {
	fs, af := approvalsFlagSet("approvals list")
	all := fs.Bool("all", false, "every ask the host holds, answered and expired ones too (else the pending ones)")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := c.parse(fs, args, 0); err != nil {
		return err
	}
	asks, err := af.list(*all)
	if err != nil {
		return err
	}
	if *asJSON {
		out := make([]askJSON, 0, len(asks))
		for _, v := range asks {
			out = append(out, askOut(v))
		}
		return c.printJSON(out)
	}
	for _, v := range asks {
		fmt.Fprintf(c.Stdout, "%s\t%s\t%s/%s\t%s/%s\tprice %d\texpires %s\n", v.ID, v.State, v.Controller, v.Agent,
			v.Application, v.Operation, v.Price, time.UnixMilli(v.ExpiresAt).UTC().Format(time.RFC3339))
	}
	return nil
}

func (c *CLI) cmdApprovalsShow(args []string) error {
	fs, af := approvalsFlagSet("approvals show")
	pos, err := c.parse(fs, args, 1)
	if err != nil {
		return err
	}
	rep, err := af.do(30*time.Second, admin.Request{Op: admin.OpApprovalsShow, Approvals: &admin.ApprovalsRequest{Ask: pos[0]}})
	if err != nil {
		return err
	}
	return c.printAsk(rep)
}

func (c *CLI) cmdApprovalsRespond(args []string) error {
	fs, af := approvalsFlagSet("approvals respond")
	approve := fs.Bool("approve", false, "approve the call: it goes on, admitted again as things are then")
	deny := fs.Bool("deny", false, "deny the call: it is refused, nothing charged")
	note := fs.String("note", "", fmt.Sprintf("why, one line of at most %d bytes (recorded with the answer)", msg.MaxApprovalNote))
	pos, err := c.parse(fs, args, 1)
	if err != nil {
		return err
	}
	if *approve == *deny {
		return fmt.Errorf("%w: exactly one of --approve and --deny is required", errUsage)
	}
	// Who answers is the host's word from SO_PEERCRED when it runs; on a
	// store opened here it is this account.
	req := admin.ApprovalsRequest{Ask: pos[0], Verdict: msg.VerdictApprove, Note: *note, Account: admin.AccountName(uint32(os.Geteuid()))}
	if *deny {
		req.Verdict = msg.VerdictDeny
	}
	if err := req.CheckRespond(); err != nil {
		return err
	}
	rep, err := af.do(30*time.Second, admin.Request{Op: admin.OpApprovalsRespond, Approvals: &req, By: views.OwnAccount()})
	if err != nil {
		return err
	}
	return c.printAsk(rep)
}

// printAsk prints a show's or a respond's ask as JSON.
func (c *CLI) printAsk(rep *admin.ApprovalsReply) error {
	if rep.Ask == nil {
		return errors.New("the host answered without the ask")
	}
	return c.printJSON(askOut(*rep.Ask))
}

// watchLine is one line of `approvals watch`.
type watchLine struct {
	Event string  `json:"event"`
	At    int64   `json:"at"`
	Ask   askJSON `json:"ask"`
}

func (c *CLI) cmdApprovalsWatch(args []string) error {
	fs, af := approvalsFlagSet("approvals watch")
	after := fs.Uint64("after", 0, "print the events after this cursor (0: every event the host journal holds)")
	if _, err := c.parse(fs, args, 0); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return c.watchApprovals(ctx, af, *after)
}

// watchApprovals prints every event after cursor, one JSON line each, and
// follows: each request waits up to admin.MaxEventsWait for the next event, so
// that the host, not a sleep here, paces the loop. It ends when ctx does.
func (c *CLI) watchApprovals(ctx context.Context, af approvalsFlags, cursor uint64) error {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	a, err := af.open(dctx, true)
	cancel()
	if err != nil {
		return err
	}
	defer a.Close()
	context.AfterFunc(ctx, func() { a.Close() }) // an interrupt ends the request under way
	enc := json.NewEncoder(c.Stdout)
	for ctx.Err() == nil {
		rep, err := approvalsDo(a, admin.MaxEventsWait+30*time.Second, admin.Request{Op: admin.OpApprovalsEvents,
			Approvals: &admin.ApprovalsRequest{After: cursor, WaitMs: admin.MaxEventsWait.Milliseconds()}})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		for _, e := range rep.Events {
			if err := enc.Encode(watchLine{Event: e.Event, At: e.At, Ask: askOut(e.Ask)}); err != nil {
				return err
			}
		}
		cursor = rep.Cursor
	}
	return nil
}

// approvalsCommands are the approvals verbs' entries in commands().
func approvalsCommands() map[string]command {
	conn := "(--store DIR | --socket PATH [--host-account NAME])"
	return map[string]command{
		"approvals list":    {"approvals list [--all] [--json] " + conn, (*CLI).cmdApprovalsList},
		"approvals show":    {"approvals show ID " + conn, (*CLI).cmdApprovalsShow},
		"approvals respond": {"approvals respond ID (--approve|--deny) [--note TEXT] " + conn, (*CLI).cmdApprovalsRespond},
		"approvals watch":   {"approvals watch [--after CURSOR] " + conn, (*CLI).cmdApprovalsWatch},
	}
}
