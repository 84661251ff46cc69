package installer

import (
	"bytes"
	"encoding/json"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stewardrt/steward/controller"
	"github.com/stewardrt/steward/controller/ctlconf"
	"github.com/stewardrt/steward/systemd"
)

// fileState is what a test compares to show a file was not changed: its
// bytes, inode, owner, mode and change time.
type fileState struct {
	data                []byte
	ino                 uint64
	uid, mode           uint32
	ctimeSec, ctimeNsec int64
}

func stateOf(t *testing.T, path string) fileState {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fileState{data: data, ino: st.Ino, uid: st.Uid, mode: st.Mode & 0o7777, ctimeSec: st.Ctim.Sec, ctimeNsec: st.Ctim.Nsec}
}

func (a fileState) same(b fileState) bool {
	return bytes.Equal(a.data, b.data) && a.ino == b.ino && a.uid == b.uid && a.mode == b.mode &&
		a.ctimeSec == b.ctimeSec && a.ctimeNsec == b.ctimeNsec
}

// TestRealOperatorCannotChangeThePayer installs for real (in a private
// mount namespace) with a controller config and a host pinned by root,
// then runs, as the operator account through the real sudo, every entry of
// the drop-in's sudo column (derived from the verb table), a bundle of
// another host key among them, and the root-only verbs: afterwards the
// config, the pin and the installed bundle are exactly as before (same
// bytes, inode and change time). The other host's bundle is refused in one
// line naming the key that differs; sudo refuses the root-only verbs
// before the installer runs. A charging controller-tool is refused, the
// operator account having no foreground allowance, until root's config
// names one. Then root re-pins and the same bundle installs.
func TestRealOperatorCannotChangeThePayer(t *testing.T) {
	if !inPrivateRoot(t, 1) {
		return
	}
	bin := realBinDir(t)
	installer := filepath.Join(bin, "steward-installer")
	t.Cleanup(func() {
		if code, out, errs := runBin(t, installer, "uninstall", "--purge"); code != 0 {
			t.Errorf("cleanup: uninstall --purge: exit %d\n%s%s", code, out, errs)
		}
	})
	if code, out, errs := runBin(t, installer, "install"); code != 0 {
		t.Fatalf("install: exit %d\n%s%s", code, out, errs)
	}
	hostCheckpoint(t, "installed")
	ctl, err := user.Lookup(systemd.ControllerUser)
	if err != nil {
		t.Fatal(err)
	}
	ctlUID, _ := strconv.Atoi(ctl.Uid)
	op, err := user.Lookup(systemd.OperatorUser)
	if err != nil {
		t.Fatal(err)
	}
	opUID, _ := strconv.Atoi(op.Uid)
	opFile := func(name string, data []byte) string {
		t.Helper()
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, opUID, -1); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// The controller's config as the installed layout names it, the
	// controller's file (controller-config would also check its keys; the
	// verbs here only read it).
	cfg := controller.Config{
		Name: "ctl", StateDir: systemd.ControllerStateDir, KeyDir: systemd.ControllerStateDir + "/keys",
		Bundle:  systemd.DefaultControllerBundle,
		Sockets: controller.Sockets{MCP: systemd.MCPSocketPath, Reverse: systemd.ReverseSocketPath, Foreground: systemd.ForegroundSocketPath},
		Agents:  controller.Agents{UIDs: []uint32{}, GIDs: []uint32{}},
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(systemd.DefaultControllerConfig, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(systemd.DefaultControllerConfig, ctlUID, ctlUID); err != nil {
		t.Fatal(err)
	}

	pinned, other := makeBundle(t, "ctl"), makeBundle(t, "ctl")
	pinPath := filepath.Join(systemd.ControllerStateDir, HostPinFile)
	if code, out, errs := runBin(t, installer, "controller-pin-host", rootFile(t, "pin.bundle", pinned)); code != 0 || errs != "" {
		t.Fatalf("root: controller-pin-host: exit %d\n%s%s", code, out, errs)
	}
	if st := stateOf(t, pinPath); int(st.uid) != ctlUID || st.mode != 0o600 {
		t.Fatalf("the pin: owner %d mode %04o, want %s 0600", st.uid, st.mode, systemd.ControllerUser)
	}
	if code, out, errs := asOperator(t, installer, "bundle-install", opFile("host.bundle", pinned)); code != 0 || errs != "" {
		t.Fatalf("operator: bundle-install of the pinned host's bundle: exit %d\n%s%s", code, out, errs)
	}
	before := map[string]fileState{}
	for _, p := range []string{systemd.DefaultControllerConfig, pinPath, systemd.DefaultControllerBundle} {
		before[p] = stateOf(t, p)
	}

	// Every sudo entry, '*' given the operand a caller would give it.
	otherFile := opFile("other.bundle", other)
	operands := map[string]string{
		"bundle-install":         otherFile,
		"controller-tool":        opFile("tool.json", []byte(`{"tool":"oracle_discover"}`)),
		"controller-tool-result": "a1", "controller-tool-ack": "a1",
		"controller-attempt-inspect": "a1", "controller-attempt-resolve": "a1",
		"controller-journal": "1",
	}
	ran := 0
	for _, v := range verbTable() {
		for _, entry := range v.sudo {
			args := strings.Fields(entry)
			if args[len(args)-1] == "*" {
				operand, ok := operands[v.name]
				if !ok {
					t.Fatalf("sudo entry %q: no operand for this test: add one", entry)
				}
				args[len(args)-1] = operand
			}
			code, out, errs := asOperator(t, installer, args...)
			ran++
			if strings.HasPrefix(errs, "sudo: ") {
				t.Errorf("operator: sudo %q: sudo refused an entry of the drop-in: %s", args, errs)
			}
			if v.name == "bundle-install" {
				pa, po := pinFor(t, pinned), pinFor(t, other)
				want := "steward-installer bundle-install: refused: " + otherFile + ": host key sha256 " + po.HostKeySha256 +
					" is not the pinned " + pa.HostKeySha256 + " (" + pinPath + "): not installed; only root re-pins the host (steward-installer controller-pin-host)\n"
				if code != ExitRefused || out != "" || errs != want {
					t.Errorf("operator: another host's bundle: exit %d\nstdout %q\nstderr %q\nwant %q", code, out, errs, want)
				}
			}
		}
	}
	if ran != 11 {
		t.Errorf("ran %d sudo entries, want the drop-in's 11", ran)
	}
	// The root-only verbs: sudo refuses them before the installer runs.
	for _, args := range [][]string{
		{"controller-config", opFile("config.json", raw)},
		{"controller-enroll", opFile("enroll.json", []byte(`{}`))},
		{"controller-pin-host", otherFile},
	} {
		code, out, errs := asOperator(t, installer, args...)
		if code == 0 || out != "" || !strings.HasPrefix(errs, "sudo: ") || strings.Contains(errs, "steward-installer") {
			t.Errorf("operator: sudo %q: exit %d\n%s%s; want sudo's refusal", args, code, out, errs)
		}
	}
	for p, was := range before {
		if !stateOf(t, p).same(was) {
			t.Errorf("%s changed through the operator's sudo", p)
		}
	}

	// The operator's account has no foreground allowance in root's
	// config: a charging controller-tool is refused through the real sudo,
	// exit 2, the exact line, nothing dialled (the socket is not even
	// looked at: no controller runs here). Once root's config names an
	// allowance the same request goes on to the socket (none here: exit 1).
	spend := opFile("spend.json", []byte(`{"tool":"oracle_call","arguments":{"application":"appliance","requestId":"r1","conversationId":"c","operationId":"text.sha256","arguments":{"text":"x"}}}`))
	if code, out, errs := asOperator(t, installer, "controller-tool", spend); code != ExitRefused || out != "" || errs != noAllowanceLine(systemd.DefaultControllerConfig) {
		t.Errorf("operator: controller-tool oracle_call without an allowance: exit %d\nstdout %q\nstderr %q\nwant %q", code, out, errs, noAllowanceLine(systemd.DefaultControllerConfig))
	}
	granted := cfg
	granted.Payer = &controller.Payer{MaxPerCall: 100, PerDay: 100_000, ForegroundAllowance: &ctlconf.PayerLimits{MaxPerCall: 5, PerDay: 10}}
	writeControllerConfig(t, granted, ctlUID)
	code, out, errs := asOperator(t, installer, "controller-tool", spend)
	if want := "steward-installer controller-tool: the controller's foreground socket " + systemd.ForegroundSocketPath; code != ExitFail || !strings.HasPrefix(errs, want) {
		t.Errorf("operator: controller-tool oracle_call with an allowance: exit %d\n%s%s\nwant stderr from %q", code, out, errs, want)
	}
	writeControllerConfig(t, cfg, ctlUID)

	// Root rotates the pin; the other host's bundle then installs.
	code, out, errs = runBin(t, installer, "controller-pin-host", rootFile(t, "other.bundle", other))
	if code != 0 || !strings.Contains(out, "(was: host key sha256 "+pinFor(t, pinned).HostKeySha256+", host uid 4344)") {
		t.Fatalf("root: re-pin: exit %d\n%s%s", code, out, errs)
	}
	if code, out, errs := asOperator(t, installer, "bundle-install", otherFile); code != 0 || !strings.HasPrefix(out, "bundle-install: installed ") {
		t.Fatalf("operator: the re-pinned host's bundle: exit %d\n%s%s", code, out, errs)
	}

	// status reads the controller's files as the controller's account: a
	// config (the controller's file) naming as its bundle a file only root
	// may read gets status no further than the controller could.
	secret := rootFile(t, "secret", pinned)
	cfg.Bundle = secret
	if raw, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(systemd.DefaultControllerConfig, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runBin(t, installer, "status")
	if want := "route   differs " + secret + ": open " + secret + ": permission denied\n"; code != ExitFail || !strings.Contains(out, want) {
		t.Fatalf("status with a config naming a root-only bundle: exit %d, want the line %q\n%s%s", code, want, out, errs)
	}
}

// writeControllerConfig writes cfg as the installed controller config, the
// controller's file, as root's controller-config would leave it.
func writeControllerConfig(t *testing.T, cfg controller.Config, ctlUID int) {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(systemd.DefaultControllerConfig, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(systemd.DefaultControllerConfig, ctlUID, ctlUID); err != nil {
		t.Fatal(err)
	}
}
