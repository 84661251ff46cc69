package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/admin"
	"github.com/stewardrt/steward/operator/hosthist"
	"github.com/stewardrt/steward/operator/views"
)

// openAttempts reaches the store for an attempts command: through the
// running host's admin socket when it runs (it knows what is in flight
// and is the one that can redeliver), else from the journal, read-only
// unless write (a release or charge then runs on the store directly, as
// every other change does when no host holds it).
func openAttempts(ctx context.Context, store string, write bool) (admin.Client, error) {
	if err := needStore(store); err != nil {
		return nil, err
	}
	a, err := admin.Dial(ctx, store)
	if err == nil {
		return a, nil
	}
	if !errors.Is(err, admin.ErrDaemonRunning) {
		return nil, err
	}
	var s *operator.Store
	if write {
		s, err = operator.Open(store)
	} else {
		s, err = operator.OpenReadOnly(store)
	}
	if errors.Is(err, journal.ErrLocked) {
		return nil, fmt.Errorf("the host holds the store but its admin socket could not be reached: %w", err)
	}
	if err != nil {
		return nil, err
	}
	return admin.OnStore(s), nil
}

// attemptsDo runs one attempt operation and prints its reply.
func (c *CLI) attemptsDo(store string, write bool, req admin.Request) (admin.Reply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := openAttempts(ctx, store, write)
	if err != nil {
		return admin.Reply{}, err
	}
	defer a.Close()
	if req.Op == admin.OpAttemptResolve {
		// A redelivery runs as long as the route's timeouts allow.
		return a.DoWithin(resolveWait, req)
	}
	rep, err := a.Do(req)
	if errors.Is(err, hosthist.ErrHeld) {
		// The admin socket did not answer, yet a host holds the index:
		// it is starting or stopping (between its socket and its index).
		return rep, errHostBetween
	}
	return rep, err
}

// errHostBetween is an attempts command that met a host holding the
// store's history index while its admin socket did not answer.
var errHostBetween = errors.New("a host holds the store's history index but its admin socket did not answer: it is starting or stopping; run the command again")

// resolveWait bounds the wait for the host's answer to a resolution: a
// redelivery may take the longest connect and response timeouts a route
// may have, and a margin.
const resolveWait = operator.MaxDeliveryTime + 30*time.Second

func (c *CLI) cmdAttemptsList(args []string) error {
	fs, store := flags("attempts list")
	state := fs.String("state", "", "list only attempts in state `S` (uncertain, definite, released, performed, not-sent, delivery-requested)")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := c.parse(fs, args, 0); err != nil {
		return err
	}
	rep, err := c.attemptsDo(*store, false, admin.Request{Op: admin.OpAttemptList, Name: *state})
	if err != nil {
		return err
	}
	if rep.Attempts == nil {
		rep.Attempts = []views.AttemptView{}
	}
	if rep.AttemptsLeftOff > 0 {
		fmt.Fprintf(c.Stderr, "steward-operator attempts list: %d earlier attempts left off: the list shows the latest %d (--state narrows it)\n", rep.AttemptsLeftOff, views.MaxListedAttempts)
	}
	if *asJSON {
		return c.printJSON(rep.Attempts)
	}
	for _, v := range rep.Attempts {
		fmt.Fprintf(c.Stdout, "%s\t%s\tcontroller %s\treserved %d\t%s\n", v.Attempt, v.State, v.Controller, v.Reserved, v.Detail)
	}
	return nil
}

func (c *CLI) cmdAttemptsInspect(args []string) error {
	fs, store := flags("attempts inspect")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := c.parse(fs, args, 1)
	if err != nil {
		return err
	}
	rep, err := c.attemptsDo(*store, false, admin.Request{Op: admin.OpAttemptInspect, Name: pos[0]})
	if err != nil {
		return err
	}
	return c.printAttempt(*rep.Attempt, *asJSON)
}

func (c *CLI) cmdAttemptsResolve(args []string) error {
	fs, store := flags("attempts resolve")
	redeliver := fs.Bool("redeliver", false, "send the attempt's exact request to its application again (the host must be running)")
	release := fs.Bool("release", false, "it was not performed: release the reservation, charge 0")
	charge := fs.Bool("charge", false, "it was performed and no answer is known: settle the reservation")
	reason := fs.String("reason", "", fmt.Sprintf("why, one line of at most %d bytes (required; it is signed into the receipt)", views.MaxResolveReason))
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := c.parse(fs, args, 1)
	if err != nil {
		return err
	}
	var action string
	n := 0
	for a, set := range map[string]bool{views.ResolveRedeliver: *redeliver, views.ResolveRelease: *release, views.ResolveCharge: *charge} {
		if set {
			action, n = a, n+1
		}
	}
	if n != 1 {
		return fmt.Errorf("%w: exactly one of --redeliver, --release and --charge is required", errUsage)
	}
	req := views.ResolveRequest{Attempt: pos[0], Action: action, Reason: *reason, By: fmt.Sprintf("uid:%d", os.Geteuid())}
	if err := views.CheckResolveRequest(req); err != nil {
		return err
	}
	rep, err := c.attemptsDo(*store, true, admin.Request{Op: admin.OpAttemptResolve, Resolve: &req})
	if err != nil {
		return err
	}
	return c.printAttempt(*rep.Attempt, *asJSON)
}

// printAttempt prints one inspected attempt.
func (c *CLI) printAttempt(v views.AttemptView, asJSON bool) error {
	if asJSON {
		return c.printJSON(v)
	}
	fmt.Fprintf(c.Stdout, "attempt %s: %s\n", v.Attempt, v.State)
	fmt.Fprintf(c.Stdout, "controller %s, application %s, %s %s, reserved %d, redeliverable %t\n", v.Controller, v.Application, v.Kind, v.Operation, v.Reserved, v.Redeliverable)
	if v.Detail != "" {
		fmt.Fprintf(c.Stdout, "detail: %s\n", v.Detail)
	}
	if v.Status != 0 {
		fmt.Fprintf(c.Stdout, "status %d, %d bytes of answer\n", v.Status, len(v.BodyText))
	}
	if v.ReceiptID != "" {
		fmt.Fprintf(c.Stdout, "receipt %s: outcome %s, charged %d", v.ReceiptID, v.Outcome, *v.Charged)
		if v.ResolvedBy != "" {
			fmt.Fprintf(c.Stdout, ", resolved by %s", v.ResolvedBy)
		}
		if v.Reason != "" {
			fmt.Fprintf(c.Stdout, ", reason: %s", v.Reason)
		}
		fmt.Fprintln(c.Stdout)
	}
	return nil
}
