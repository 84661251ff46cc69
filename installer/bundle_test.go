package installer

import (
	"bytes"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/stewardrt/steward/controller"
)

func TestBundleInstall(t *testing.T) {
	f := newCtlFixture(t, "ctl")
	f.install(t, f.configBytes(t))
	bundle := makeBundle(t, "ctl")
	f.pinHost(t, bundle)
	src := writeOperatorFile(t, "host.bundle", bundle)

	code, out, errs := run(t, f.env, "bundle-install", src)
	if code != ExitOK || errs != "" || out != "bundle-install: installed "+f.cfg.Bundle+": controller ctl, host uid 4344, 1 route(s) [appliance]; the controller reads it when it next starts\n" {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(f.cfg.Bundle, &st); err != nil || st.Mode&0o7777 != bundleMode || st.Uid != uint32(os.Geteuid()) {
		t.Fatalf("installed bundle: %v, mode %04o uid %d", err, st.Mode&0o7777, st.Uid)
	}
	if got, _ := os.ReadFile(f.cfg.Bundle); !bytes.Equal(got, bundle) {
		t.Fatal("installed bytes differ")
	}
	ino := st.Ino
	// The same bytes again: unchanged, the file not rewritten.
	code, out, _ = run(t, f.env, "bundle-install", src)
	if code != ExitOK || !strings.HasPrefix(out, "bundle-install: unchanged "+f.cfg.Bundle) {
		t.Fatalf("again: exit %d %s", code, out)
	}
	if err := syscall.Lstat(f.cfg.Bundle, &st); err != nil || st.Ino != ino {
		t.Fatal("an unchanged bundle was rewritten")
	}
	// The controller accepts what was installed: its config and bundle load.
	cfg, _, err := controller.LoadConfig(f.config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := controller.LoadBundle(cfg); err != nil {
		t.Fatalf("the controller refuses the installed bundle: %v", err)
	}
}

// TestBundleInstallRefusals: a bundle that does not verify, one for another
// controller, and the size bound; the installed file is never touched.
func TestBundleInstallRefusals(t *testing.T) {
	f := newCtlFixture(t, "ctl")
	f.install(t, f.configBytes(t))
	good := makeBundle(t, "ctl")
	f.pinHost(t, good)
	if err := os.WriteFile(f.cfg.Bundle, []byte("the old bundle"), 0o600); err != nil {
		t.Fatal(err)
	}
	tampered := append([]byte{}, good...)
	tampered[len(tampered)/2] ^= 1
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"tampered", tampered, "not a well-formed signed bundle"},
		{"not CBOR", []byte("{}"), "not a well-formed signed bundle"},
		{"other controller", makeBundle(t, "other"), `the bundle was built for controller "other", but the installed config ` + f.config + ` is controller "ctl"`},
		// At the bound the file is read (and refused for what it is); one
		// byte past it, for its size.
		{"at the bound", bytes.Repeat([]byte{0}, controller.MaxBundleBytes), "not a well-formed signed bundle"},
		{"one byte past", bytes.Repeat([]byte{0}, controller.MaxBundleBytes+1), "too large: 1048577 bytes, the limit is 1048576"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := writeOperatorFile(t, "host.bundle", c.data)
			code, out, errs := run(t, f.env, "bundle-install", src)
			if code != ExitRefused || out != "" || !strings.HasPrefix(errs, "steward-installer bundle-install: refused: "+src+": ") || !strings.Contains(errs, c.want) {
				t.Fatalf("exit %d\nstdout %q\nstderr %q\nwant %q", code, out, errs, c.want)
			}
			if got, _ := os.ReadFile(f.cfg.Bundle); string(got) != "the old bundle" {
				t.Fatal("a refused bundle changed the installed one")
			}
		})
	}
}

// TestBundleInstallWithoutConfig: with no config installed the bundle goes
// to the default path.
func TestBundleInstallWithoutConfig(t *testing.T) {
	f := newCtlFixture(t, "ctl")
	bundle := makeBundle(t, "anyname")
	f.pinHost(t, bundle)
	code, out, errs := run(t, f.env, "bundle-install", writeOperatorFile(t, "b", bundle))
	if code != ExitOK || !strings.HasPrefix(out, "bundle-install: installed "+f.env.Controller.Bundle+": controller anyname") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
}
