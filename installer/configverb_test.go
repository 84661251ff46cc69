package installer

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stewardrt/steward/controller"
	"github.com/stewardrt/steward/controller/ledger"
)

// configFixture is a controller fixture whose installed layout (the env's
// sockets and state dir) is the config's, with real role keys and a real
// bundle installed, so that controller-config has everything it checks.
func configFixture(t *testing.T) *ctlFixture {
	t.Helper()
	f := newCtlFixture(t, "dev")
	f.env.Controller.MCP = f.cfg.Sockets.MCP
	f.env.Controller.Reverse = f.cfg.Sockets.Reverse
	f.env.Controller.Foreground = f.cfg.Sockets.Foreground
	if _, err := controller.InitKeys(f.cfg.KeyDir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.cfg.Bundle, makeBundle(t, "dev"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func decodeConfigResult(t *testing.T, out string) ConfigResult {
	t.Helper()
	var r ConfigResult
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	return r
}

// TestControllerConfigInstalls installs a first config, repeats it without
// change, and shows that a journal bound to another config is named with
// the enrollment it needs.
func TestControllerConfigInstalls(t *testing.T) {
	f := configFixture(t)
	b := f.configBytes(t)
	req := writeOperatorFile(t, "config.json", b)
	code, out, errs := run(t, f.env, "controller-config", req)
	if code != ExitOK || errs != "" {
		t.Fatalf("controller-config: exit %d\n%s%s", code, out, errs)
	}
	r := decodeConfigResult(t, out)
	if r.Config != f.config || !r.Changed || r.ConfigSha256 != binding(t, b) || r.JournalBindingSha256 != "" ||
		r.Next != "the controller reads it when it next starts" {
		t.Fatalf("result %+v", r)
	}
	got, err := os.ReadFile(f.config)
	if err != nil || !bytes.Equal(got, b) {
		t.Fatalf("installed config %q, %v", got, err)
	}
	if fi, err := os.Lstat(f.config); err != nil || fi.Mode().Perm() != configMode {
		t.Fatalf("installed config mode %v, %v; want %04o", fi.Mode(), err, configMode)
	}

	code, out, errs = run(t, f.env, "controller-config", req)
	if r := decodeConfigResult(t, out); code != ExitOK || errs != "" || r.Changed {
		t.Fatalf("repeat: exit %d %+v\n%s", code, r, errs)
	}

	// A streamable HTTP socket beside the MCP socket is the installed
	// layout's (the refusals test one anywhere else).
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["sockets"].(map[string]any)["mcpHTTP"] = filepath.Join(filepath.Dir(f.cfg.Sockets.MCP), "mcp-http.sock")
	withHTTP, _ := json.Marshal(m)
	code, out, errs = run(t, f.env, "controller-config", writeOperatorFile(t, "config.json", withHTTP))
	if r := decodeConfigResult(t, out); code != ExitOK || errs != "" || !r.Changed {
		t.Fatalf("with sockets.mcpHTTP beside sockets.mcp: exit %d %+v\n%s", code, r, errs)
	}
	// So is an advisor socket there.
	m["sockets"].(map[string]any)["advisor"] = filepath.Join(filepath.Dir(f.cfg.Sockets.MCP), "advisor.sock")
	withAdvisor, _ := json.Marshal(m)
	code, out, errs = run(t, f.env, "controller-config", writeOperatorFile(t, "config.json", withAdvisor))
	if r := decodeConfigResult(t, out); code != ExitOK || errs != "" || !r.Changed {
		t.Fatalf("with sockets.advisor beside sockets.mcp: exit %d %+v\n%s", code, r, errs)
	}
	code, out, errs = run(t, f.env, "controller-config", req)
	if r := decodeConfigResult(t, out); code != ExitOK || errs != "" || !r.Changed {
		t.Fatalf("back to the first config: exit %d %+v\n%s", code, r, errs)
	}

	// The controller started once with this config; a new one (another
	// agent allowed) is installed, and the result says enroll comes next.
	f.start(t, b).Close()
	b2 := f.configBytes(t, 4242)
	code, out, errs = run(t, f.env, "controller-config", writeOperatorFile(t, "config.json", b2))
	r = decodeConfigResult(t, out)
	if code != ExitOK || errs != "" || !r.Changed || r.JournalBindingSha256 != binding(t, b) ||
		!strings.Contains(r.Next, "controller-enroll") || !strings.Contains(r.Next, "expectedBindingSha256 "+binding(t, b)) ||
		!strings.Contains(r.Next, "targetConfigSha256 "+binding(t, b2)) {
		t.Fatalf("new config over a bound journal: exit %d %+v\n%s", code, r, errs)
	}
}

// TestControllerConfigRefusals refuses every config that does not parse or
// names something the installed controller does not have, with exit 2 and
// nothing installed.
func TestControllerConfigRefusals(t *testing.T) {
	f := configFixture(t)
	edit := func(change func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(f.configBytes(t), &m); err != nil {
			t.Fatal(err)
		}
		change(m)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	sockets := func(m map[string]any) map[string]any { return m["sockets"].(map[string]any) }
	for _, c := range []struct {
		name string
		body []byte
		want string
	}{
		{"unknown field", edit(func(m map[string]any) { m["payr"] = 1 }), `controller config refused: json: unknown field "payr"`},
		{"trailing data", append(f.configBytes(t), "{}"...), "controller config refused: data after the config object"},
		{"another mcp socket", edit(func(m map[string]any) { sockets(m)["mcp"] = "/run/other.sock" }),
			`sockets.mcp is "/run/other.sock", but the installed controller's is "` + f.cfg.Sockets.MCP + `"`},
		{"another reverse socket", edit(func(m map[string]any) { sockets(m)["reverse"] = "/run/r.sock" }),
			`sockets.reverse is "/run/r.sock", but the installed controller's is "` + f.cfg.Sockets.Reverse + `"`},
		{"another foreground socket", edit(func(m map[string]any) { sockets(m)["foreground"] = "/run/f.sock" }),
			`sockets.foreground is "/run/f.sock", but the installed controller's is "` + f.cfg.Sockets.Foreground + `"`},
		{"a streamable HTTP socket outside the MCP socket's directory", edit(func(m map[string]any) { sockets(m)["mcpHTTP"] = "/run/elsewhere/mcp-http.sock" }),
			`sockets.mcpHTTP is "/run/elsewhere/mcp-http.sock", but the installed controller can serve it only in ` + filepath.Dir(f.cfg.Sockets.MCP) + `, beside its MCP socket`},
		{"an advisor socket outside the MCP socket's directory", edit(func(m map[string]any) { sockets(m)["advisor"] = "/run/elsewhere/advisor.sock" }),
			`sockets.advisor is "/run/elsewhere/advisor.sock", but the installed controller can serve it only in ` + filepath.Dir(f.cfg.Sockets.MCP) + `, beside its MCP socket (e.g. "` + filepath.Join(filepath.Dir(f.cfg.Sockets.MCP), "advisor.sock") + `")`},
		{"an advisor socket one directory below the MCP socket's", edit(func(m map[string]any) {
			sockets(m)["advisor"] = filepath.Join(filepath.Dir(f.cfg.Sockets.MCP), "sub", "advisor.sock")
		}), `sockets.advisor is "` + filepath.Join(filepath.Dir(f.cfg.Sockets.MCP), "sub", "advisor.sock") + `", but the installed controller can serve it only in ` + filepath.Dir(f.cfg.Sockets.MCP) + `, beside its MCP socket`},
		{"another state dir", edit(func(m map[string]any) { m["stateDir"] = "/var/lib/elsewhere" }),
			`stateDir is "/var/lib/elsewhere", but the installed controller's is "` + f.cfg.StateDir + `"`},
		{"no keys", edit(func(m map[string]any) { m["keyDir"] = filepath.Join(f.dir, "nokeys") }),
			"keyDir: controller.key is missing (run `steward-controller keys init --dir " + filepath.Join(f.dir, "nokeys") + "` as the controller's account)"},
		{"no bundle", edit(func(m map[string]any) { m["bundle"] = filepath.Join(f.dir, "none.bundle") }),
			"install the operator's bundle first: steward-installer bundle-install"},
		{"a uid two agent entries match", edit(func(m map[string]any) {
			m["agents"] = map[string]any{"uids": []uint32{}, "gids": []uint32{}, "named": []any{
				map[string]string{"name": "ops", "account": "root"}, map[string]string{"name": "ops2", "account": "root"}}}
		}), `controller config refused: agents.named[1] {name "ops2", account "root"} maps uid 0, which agents.named[0] {name "ops", account "root"} already maps: a uid may match one entry only`},
		{"a config that still lists its applications", edit(func(m map[string]any) {
			m["toolTask"] = map[string]any{"applicationServices": []any{map[string]any{"application": "other", "protocol": "oracle-operations-v1"}}}
		}), `controller config refused: toolTask: no longer part of a controller config: the host's active routes are its applications; remove it and enroll the config with steward-installer controller-enroll`},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := writeOperatorFile(t, "config.json", c.body)
			code, out, errs := run(t, f.env, "controller-config", req)
			if code != ExitRefused || out != "" || !strings.Contains(errs, "steward-installer controller-config: refused: ") || !strings.Contains(errs, c.want) {
				t.Fatalf("exit %d\nstdout %q\nstderr %q\nwant %q", code, out, errs, c.want)
			}
			if _, err := os.Lstat(f.config); !os.IsNotExist(err) {
				t.Fatalf("a refused config was installed: %v", err)
			}
		})
	}

	// The config bound (64 KiB): one byte more is refused before parsing.
	big := append(f.configBytes(t), bytes.Repeat([]byte(" "), 65536)...)
	big = big[:65537]
	code, out, errs := run(t, f.env, "controller-config", writeOperatorFile(t, "config.json", big))
	if code != ExitRefused || out != "" || !strings.Contains(errs, "too large: 65537 bytes, the limit is 65536") {
		t.Fatalf("one past the bound: exit %d\n%s%s", code, out, errs)
	}
}

// TestControllerConfigRootOnly: the verb is in no sudo column, so the
// operator's sudoers rule cannot reach it, and it refuses a non-root euid.
func TestControllerConfigRootOnly(t *testing.T) {
	rule := string(renderSudoers("/opt/steward/bin"))
	if strings.Contains(rule, "controller-config") {
		t.Fatalf("the sudoers drop-in lets the operator run controller-config:\n%s", rule)
	}
	f := configFixture(t)
	env := f.env
	env.EUID = 4242
	env.Controller.Account = "steward-controller"
	code, out, errs := run(t, env, "controller-config", writeOperatorFile(t, "config.json", f.configBytes(t)))
	if code != ExitFail || out != "" || errs != "steward-installer controller-config: must run as root (euid is 4242): this verb changes the payer's side, which the operator's sudo cannot reach\n" {
		t.Fatalf("as euid 4242: exit %d\n%s%s", code, out, errs)
	}
}

// TestControllerConfigRefusedWhileUncertain: a new config needs an
// enrollment, which an unresolved attempt blocks, so it is not installed
// (the controller would not start with it); the same config as the
// journal's binding still installs.
func TestControllerConfigRefusedWhileUncertain(t *testing.T) {
	f := configFixture(t)
	b := f.configBytes(t)
	f.install(t, b)
	j := f.start(t, b)
	if _, err := j.Append(ledger.KindBegin, ledger.Begin{Attempt: "a1b2", Tool: "oracle_call", Application: "appliance",
		Operation: "calc.evaluate", RequestID: "r1", Kind: "invoke", RequestSHA256: make([]byte, 32)}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	code, out, errs := run(t, f.env, "controller-config", writeOperatorFile(t, "config.json", f.configBytes(t, 4242)))
	if code != ExitFail || out != "" || errs != "steward-installer controller-config: 1 unresolved attempt(s) (a1b2) would block the enrollment this config needs, so it is not installed: resolve them first: sudo steward-installer controller-attempt-resolve a1b2 records what the host says of it; while the host reports it uncertain, its operator resolves it there first (steward-operator attempts resolve a1b2 --redeliver|--release|--charge --reason TEXT)\n" {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	if got, err := os.ReadFile(f.config); err != nil || !bytes.Equal(got, b) {
		t.Fatalf("the installed config changed: %q %v", got, err)
	}
	code, out, errs = run(t, f.env, "controller-config", writeOperatorFile(t, "config.json", b))
	if r := decodeConfigResult(t, out); code != ExitOK || errs != "" || r.Changed || r.JournalBindingSha256 != "" {
		t.Fatalf("the bound config again: exit %d %+v\n%s", code, r, errs)
	}
}
