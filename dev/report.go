package dev

import (
	"encoding/json"
	"fmt"
	"io"
	"os/exec"

	"github.com/stewardrt/steward/operator"
	"github.com/stewardrt/steward/operator/audit"
)

// printReady prints where the stack is and the MCP client configuration to
// paste into an agent.
func printReady(w io.Writer, l Layout) {
	fmt.Fprintf(w, "\nsteward-dev: ready.\n")
	fmt.Fprintf(w, "  state          %s\n", l.State)
	fmt.Fprintf(w, "  manifest       %s\n", l.ManifestPath())
	fmt.Fprintf(w, "  sockets        %s (removed when it stops)\n", l.Run)
	fmt.Fprintf(w, "  MCP socket     %s\n", l.MCPSocket)
	if l.MCPHTTPSocket != "" {
		fmt.Fprintf(w, "  MCP over HTTP  %s (streamable HTTP on a Unix socket)\n", l.MCPHTTPSocket)
	}
	fmt.Fprintf(w, "  operator store %s (steward-operator ... --store %s: the read-only verbs while it runs,\n"+
		"                 the others once it is stopped; the host's admin socket is %s)\n", l.OperatorStore, l.OperatorStore, l.AdminSocket)
	fmt.Fprintf(w, "  controller     %s (steward-controller ... --config %s)\n", l.Controller, l.Config)
	fmt.Fprintf(w, "  appliance      %s\n", l.ApplianceSocket)
	proxy, found := proxyCommand()
	cfg := map[string]any{"mcpServers": map[string]any{"steward": map[string]any{
		"command": proxy,
		"args":    []string{"mcp", "--socket", l.MCPSocket},
	}}}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	fmt.Fprintf(w, "\nMCP client configuration (the agent launches the keyless proxy `steward-controller mcp`):\n%s\n", b)
	if !found {
		fmt.Fprintf(w, "steward-controller is not on your PATH: install it with `go install ./cmd/steward-controller`\n"+
			"(it goes to $(go env GOPATH)/bin) or use the full path of a built binary as \"command\".\n")
	}
}

// proxyCommand is the command an MCP client runs: steward-controller's full
// path when it is on PATH, else its bare name.
func proxyCommand() (string, bool) {
	p, err := exec.LookPath("steward-controller")
	if err != nil {
		return "steward-controller", false
	}
	return p, true
}

// purseBalance reads the dev purse from the store without taking its lock
// (the host daemon holds it).
func purseBalance(l Layout) (uint64, error) {
	st, err := operator.OpenReadOnly(l.OperatorStore)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	p, err := st.PurseShow(ControllerName)
	if err != nil {
		return 0, err
	}
	return p.Balance, nil
}

// verify checks every receipt of the stopped host's store (signatures, hash
// chain, checkpoints, the purse arithmetic) and that the demonstration's
// receipts are in the chain, and prints the summary.
func verify(w io.Writer, l Layout, receipts []string) error {
	rep, err := audit.VerifyStore(l.OperatorStore)
	if err != nil {
		return fmt.Errorf("steward-dev: receipts verify: %w", err)
	}
	fmt.Fprintf(w, "\n== receipts verify --store %s\n", l.OperatorStore)
	fmt.Fprintf(w, "%d receipts, %d checkpoints, covered through receipt %d (%d not yet under a checkpoint), chain head %s\n",
		rep.Receipts, rep.Checkpoints, rep.CoveredThrough, rep.Uncovered, rep.Head)
	for _, p := range rep.Purses {
		fmt.Fprintf(w, "purse %s: funded %d, charged %d, balance %d, %d receipts\n", p.Controller, p.Funded, p.Charged, p.Balance, p.Receipts)
	}
	if len(receipts) > 0 {
		last := receipts[len(receipts)-1]
		if rep.Head != last {
			return fmt.Errorf("steward-dev: the chain head %s is not the demonstration's last receipt %s", rep.Head, last)
		}
		// Re-verify the whole exported chain as an outside verifier would,
		// pinned to the operator's public key.
		exported, err := audit.ExportStore(l.OperatorStore)
		if err != nil {
			return err
		}
		st, err := operator.OpenReadOnly(l.OperatorStore)
		if err != nil {
			return err
		}
		pub := st.PublicKey()
		st.Close()
		if _, err := audit.VerifyFile(exported, pub); err != nil {
			return fmt.Errorf("steward-dev: exported receipts: %w", err)
		}
	}
	fmt.Fprintf(w, "receipts verified.\n")
	return nil
}
