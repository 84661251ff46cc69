package installer

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/stewardrt/steward/wire/msg"
)

// pinFor is the pin a bundle needs, from the bundle itself.
func pinFor(t *testing.T, bundle []byte) hostPin {
	t.Helper()
	b, _, _, err := msg.OpenBundle(bundle)
	if err != nil {
		t.Fatal(err)
	}
	return pinOf(b)
}

// TestPinHostThenInstall: root pins a host; the operator installs that
// host's bundle; a bundle of another host key, or of the same key with
// another host uid, is refused in one line naming what differs, and
// nothing is installed; root re-pins (rotation) and the other host's
// bundle installs, the first one's no longer does.
func TestPinHostThenInstall(t *testing.T) {
	f := newCtlFixture(t, "ctl")
	f.install(t, f.configBytes(t))
	sameKey := makeBundles(t, "ctl", 4344, 4345)
	a, aOtherUID := sameKey[0], sameKey[1]
	b := makeBundle(t, "ctl") // another host key, the same uid 4344
	pa, pb := pinFor(t, a), pinFor(t, b)
	path := f.env.Controller.hostPinPath()

	code, out, errs := run(t, f.env, "controller-pin-host", writeOperatorFile(t, "a.bundle", a))
	if code != ExitOK || errs != "" || out != "controller-pin-host: pinned "+path+": host key sha256 "+pa.HostKeySha256+
		", host uid 4344 (was: none); bundle-install now installs only bundles of this host\n" {
		t.Fatalf("pin: exit %d\n%s%s", code, out, errs)
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil || st.Mode&0o7777 != hostPinMode || st.Uid != uint32(os.Geteuid()) {
		t.Fatalf("the pin: %v, mode %04o uid %d", err, st.Mode&0o7777, st.Uid)
	}
	if got, err := readHostPin(path); err != nil || got != pa {
		t.Fatalf("the pin reads %+v %v, want %+v", got, err, pa)
	}
	code, out, _ = run(t, f.env, "controller-pin-host", writeOperatorFile(t, "a.bundle", a))
	if code != ExitOK || !strings.HasPrefix(out, "controller-pin-host: unchanged "+path) {
		t.Fatalf("pin again: exit %d %s", code, out)
	}

	if code, out, errs := run(t, f.env, "bundle-install", writeOperatorFile(t, "a.bundle", a)); code != ExitOK || !strings.HasPrefix(out, "bundle-install: installed ") {
		t.Fatalf("the pinned host's bundle: exit %d\n%s%s", code, out, errs)
	}
	for _, c := range []struct {
		name   string
		bundle []byte
		differ string
	}{
		{"another host key", b, "host key sha256 " + pb.HostKeySha256 + " is not the pinned " + pa.HostKeySha256},
		{"another host uid", aOtherUID, "host uid 4345 is not the pinned 4344"},
		{"both", makeBundles(t, "ctl", 4345)[0], " is not the pinned " + pa.HostKeySha256 + "; host uid 4345 is not the pinned 4344"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := writeOperatorFile(t, "other.bundle", c.bundle)
			code, out, errs := run(t, f.env, "bundle-install", src)
			tail := c.differ + " (" + path + "): not installed; only root re-pins the host (steward-installer controller-pin-host)\n"
			if code != ExitRefused || out != "" || !strings.HasPrefix(errs, "steward-installer bundle-install: refused: "+src+": ") ||
				!strings.HasSuffix(errs, tail) || strings.Count(errs, "\n") != 1 {
				t.Fatalf("exit %d\nstdout %q\nstderr %q\nwant the suffix %q", code, out, errs, tail)
			}
			if got, _ := os.ReadFile(f.cfg.Bundle); !bytes.Equal(got, a) {
				t.Fatal("a refused bundle replaced the installed one")
			}
		})
	}

	// Rotation: root pins b, saying what it replaced.
	code, out, errs = run(t, f.env, "controller-pin-host", writeOperatorFile(t, "b.bundle", b))
	if code != ExitOK || !strings.Contains(out, "host key sha256 "+pb.HostKeySha256+", host uid 4344 (was: host key sha256 "+pa.HostKeySha256+", host uid 4344)") {
		t.Fatalf("re-pin: exit %d\n%s%s", code, out, errs)
	}
	if code, out, errs := run(t, f.env, "bundle-install", writeOperatorFile(t, "b.bundle", b)); code != ExitOK {
		t.Fatalf("the re-pinned host's bundle: exit %d\n%s%s", code, out, errs)
	}
	if code, _, errs := run(t, f.env, "bundle-install", writeOperatorFile(t, "a.bundle", a)); code != ExitRefused || !strings.Contains(errs, "is not the pinned "+pb.HostKeySha256) {
		t.Fatalf("the old host's bundle after rotation: exit %d %s", code, errs)
	}
}

// TestBundleInstallNeedsAPin: without a pin nothing is installed, and the
// refusal names the root verb that pins.
func TestBundleInstallNeedsAPin(t *testing.T) {
	f := newCtlFixture(t, "ctl")
	f.install(t, f.configBytes(t))
	code, out, errs := run(t, f.env, "bundle-install", writeOperatorFile(t, "host.bundle", makeBundle(t, "ctl")))
	want := "steward-installer bundle-install: no host is pinned for this controller (" + f.env.Controller.hostPinPath() +
		" is absent): root pins it first: steward-installer controller-pin-host BUNDLE\n"
	if code != ExitFail || out != "" || errs != want {
		t.Fatalf("exit %d\nstdout %q\nstderr %q\nwant %q", code, out, errs, want)
	}
	if _, err := os.Lstat(f.cfg.Bundle); !os.IsNotExist(err) {
		t.Fatalf("a bundle was installed without a pin: %v", err)
	}
}

// TestHostPinFile: the pin file's bound (at it read, one byte past it
// refused) and its strict shape; a pin that is not one blocks the install.
func TestHostPinFile(t *testing.T) {
	f := newCtlFixture(t, "ctl")
	f.install(t, f.configBytes(t))
	bundle := makeBundle(t, "ctl")
	good, err := json.Marshal(pinFor(t, bundle))
	if err != nil {
		t.Fatal(err)
	}
	path := f.env.Controller.hostPinPath()
	pad := func(n int) []byte {
		return append(append([]byte{}, good...), bytes.Repeat([]byte(" "), n-len(good))...)
	}
	for _, c := range []struct {
		name string
		data []byte
		want string // "" installs
	}{
		{"at the bound", pad(hostPinLimit), ""},
		{"one byte past", pad(hostPinLimit + 1), path + ": too large: 4097 bytes, the limit is 4096"},
		{"unknown field", []byte(`{"hostKeySha256":"` + strings.Repeat("a", 64) + `","hostUid":1,"controller":"x"}`), `unknown field "controller"`},
		{"short hash", []byte(`{"hostKeySha256":"abc","hostUid":1}`), `hostKeySha256 "abc" is not 64 lowercase hex digits`},
		{"trailing data", append(append([]byte{}, good...), "{}"...), "data after the pin object"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := os.WriteFile(path, c.data, 0o600); err != nil {
				t.Fatal(err)
			}
			os.Remove(f.cfg.Bundle)
			code, out, errs := run(t, f.env, "bundle-install", writeOperatorFile(t, "host.bundle", bundle))
			if c.want == "" {
				if code != ExitOK {
					t.Fatalf("exit %d\n%s%s", code, out, errs)
				}
				return
			}
			if code != ExitFail || out != "" || !strings.HasPrefix(errs, "steward-installer bundle-install: the host pin: ") || !strings.Contains(errs, c.want) {
				t.Fatalf("exit %d\nstdout %q\nstderr %q\nwant %q", code, out, errs, c.want)
			}
			if _, err := os.Lstat(f.cfg.Bundle); !os.IsNotExist(err) {
				t.Fatal("installed through a broken pin")
			}
		})
	}
	// Root re-pins over a broken pin, and says it was unreadable.
	code, out, errs := run(t, f.env, "controller-pin-host", writeOperatorFile(t, "host.bundle", bundle))
	if code != ExitOK || !strings.Contains(out, "(was: unreadable ("+path+": data after the pin object))") {
		t.Fatalf("re-pin over a broken pin: exit %d\n%s%s", code, out, errs)
	}
}

// TestPinHostRefusals: root only; a bundle that does not verify or was
// built for another controller is not pinned.
func TestPinHostRefusals(t *testing.T) {
	f := newCtlFixture(t, "ctl")
	f.install(t, f.configBytes(t))
	path := f.env.Controller.hostPinPath()
	env := f.env
	env.EUID = 4242
	env.Controller.Account = "steward-controller"
	code, out, errs := run(t, env, "controller-pin-host", writeOperatorFile(t, "b", makeBundle(t, "ctl")))
	if code != ExitFail || out != "" || errs != "steward-installer controller-pin-host: must run as root (euid is 4242): this verb changes the payer's side, which the operator's sudo cannot reach\n" {
		t.Fatalf("as euid 4242: exit %d\n%s%s", code, out, errs)
	}
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"not a bundle", []byte("{}"), "not a well-formed signed bundle"},
		{"other controller", makeBundle(t, "other"), `the bundle was built for controller "other", but the installed config ` + f.config + ` is controller "ctl"`},
	} {
		src := writeOperatorFile(t, "b", c.data)
		code, out, errs := run(t, f.env, "controller-pin-host", src)
		if code != ExitRefused || out != "" || !strings.HasPrefix(errs, "steward-installer controller-pin-host: refused: "+src+": ") || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d\n%s%s", c.name, code, out, errs)
		}
		if _, err := os.Lstat(path); !os.IsNotExist(err) {
			t.Fatalf("%s: a refused bundle was pinned", c.name)
		}
	}
}
