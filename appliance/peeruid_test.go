package appliance

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stewardrt/steward/internal/testaccount"
)

// TestPeerUIDFlagValues: --peer-uid takes decimal uids, repeated or as a
// list, up to 4294967294; one past ((uid_t)-1, no account), a sign, a
// blank or a name is refused as usage (exit 2) naming the value.
func TestPeerUIDFlagValues(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []uint32
	}{{"0", []uint32{0}}, {"7,8", []uint32{7, 8}}, {"4294967294", []uint32{4294967294}}} {
		got, err := parsePeerUIDs(c.in)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%q: %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"4294967295", "-1", "", "7,", "root", "0x10"} {
		var stdout, stderr bytes.Buffer
		code := Main([]string{"serve", "--socket", "/x", "--state", "/y", "--peer-uid", bad}, &stdout, &stderr)
		want := fmt.Sprintf(`invalid value %q for flag -peer-uid: `, bad)
		if code != 2 || !strings.Contains(stderr.String(), want) || !strings.Contains(stderr.String(), "is not an account uid (a decimal number from 0 to 4294967294)") {
			t.Errorf("--peer-uid %q: exit %d, stderr %s", bad, code, stderr.String())
		}
	}
}

// TestCommandPeerUID runs steward-appliance serve as a test account of
// its own, and this process (root, another account, not in the socket's
// group) as the peer: by default the peer is refused (403, saying whose
// account it is), and --peer-uid 0, alone, in a list or repeated, lets it
// be served.
func TestCommandPeerUID(t *testing.T) {
	uid, gid := testaccount.Peer(t)
	dir := shortDir(t)
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	// The test binary lives in a root-only build directory: copy it where
	// the account can run it.
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "appliance.test")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		flags  []string
		status int
	}{
		{nil, http.StatusForbidden},
		{[]string{"--peer-uid", "0"}, http.StatusOK},
		{[]string{"--peer-uid", "7,0"}, http.StatusOK},
		{[]string{"--peer-uid", "7", "--peer-uid", "0"}, http.StatusOK},
		{[]string{"--peer-uid", "7"}, http.StatusForbidden},
	} {
		run := filepath.Join(dir, fmt.Sprintf("run%d", i))
		if err := os.Mkdir(run, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(run, int(uid), int(gid)); err != nil {
			t.Fatal(err)
		}
		sock := filepath.Join(run, "a.sock")
		args := append([]string{"serve", "--socket", sock, "--state", filepath.Join(run, "state")}, c.flags...)
		p := startAs(t, bin, uid, gid, args...)
		p.waitReady(t, sock)
		status, body := getOperations(t, sock)
		if status != c.status {
			t.Fatalf("%q: the peer got %d %s, want %d", c.flags, status, body, c.status)
		}
		if status == http.StatusForbidden && !strings.Contains(string(body), fmt.Sprintf("peer uid 0 gid 0 is not the host's account (uid %d, group %d", uid, gid)) {
			t.Fatalf("%q: refusal %s", c.flags, body)
		}
		p.cmd.Process.Signal(syscall.SIGTERM)
		if err := p.cmd.Wait(); err != nil {
			t.Fatalf("%q: exit %v\n%s", c.flags, err, p.stderr)
		}
	}
}

// startAs runs the steward-appliance command from bin as uid:gid.
func startAs(t *testing.T, bin string, uid, gid uint32, args ...string) *child {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), childEnv+"=main")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	return startCmd(t, cmd)
}

// getOperations asks for the operation list on one fresh connection. It
// reads the answer from the raw connection: a refused peer is answered
// before its request is read, which net/http's client takes for a broken
// connection.
func getOperations(t *testing.T, sock string) (int, []byte) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	io.WriteString(c, "GET /v1/operations HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}
