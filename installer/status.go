package installer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/stewardrt/steward/systemd"
	"golang.org/x/sys/unix"
)

// stateDown is a daemon that is installed but not ready.
const stateDown = "down"

// statusReport is what `status --json` prints.
type statusReport struct {
	Root      string    `json:"root"`
	BinDir    string    `json:"bin_dir"`
	Installed bool      `json:"installed"`
	Findings  []finding `json:"findings"`
}

// runStatus reports accounts, directories and their modes, the installed
// files, the sockets and the daemons' readiness. It exits ExitOK only when
// everything install makes is present and as install makes it and no
// socket has the wrong owner or mode; an absent socket or a daemon that is
// not running is reported but does not change the exit status (the
// controller cannot start before it is enrolled).
func runStatus(ctx context.Context, c *call, o options) int {
	// The sudoers drop-in and the state directories are root's to read.
	t, err := resolveTree(o, c.env, ": sudo steward-installer status")
	if err != nil {
		return c.failf("%v", err)
	}
	binDir, files, err := resolveBinFiles(o, c.env)
	if err != nil {
		return c.failf("%v", err)
	}
	db, found, err := examine(t, files)
	if err != nil {
		return c.failf("%v", err)
	}
	rep := statusReport{Root: t.root, BinDir: binDir, Installed: true, Findings: found}
	rep.Findings = append(rep.Findings, socketFindings(t, db)...)
	routes, err := statusRoutes(t, c.env.Controller, db)
	if err != nil {
		return c.failf("%v", err)
	}
	rep.Findings = append(rep.Findings, routes...)
	if t.real {
		rep.Findings = append(rep.Findings, daemonFindings(ctx)...)
	}
	missing, differ := 0, 0
	for _, f := range rep.Findings {
		switch {
		case f.State == stateDiffers:
			differ++
		case f.State == stateMissing:
			missing++
		}
	}
	rep.Installed = missing == 0 && differ == 0

	if o.json {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return c.failf("%v", err)
		}
	} else {
		for _, f := range rep.Findings {
			line := fmt.Sprintf("%-7s %-7s %s", f.Kind, f.State, f.Name)
			if f.Detail != "" {
				line += ": " + f.Detail
			}
			fmt.Fprintln(c.stdout, line)
		}
		if rep.Installed {
			fmt.Fprintf(c.stdout, "status: installed in %s\n", t.root)
		} else {
			fmt.Fprintf(c.stdout, "status: not installed correctly in %s: %d missing, %d differ\n", t.root, missing, differ)
		}
	}
	if !rep.Installed {
		return ExitFail
	}
	return ExitOK
}

// socketFindings checks the controller's sockets, the host's approvals
// socket and every route socket in the host's directory, when they exist.
func socketFindings(t tree, db *accountDB) []finding {
	var out []finding
	for _, s := range systemd.Sockets() {
		out = append(out, socketFinding(t, db, s.Path, s.User, s.Group, s.Mode))
	}
	out = append(out, socketFinding(t, db, systemd.ReverseSocketPath, systemd.ControllerUser, systemd.OperatorUser, systemd.ReverseSocketMode))
	out = append(out, socketFinding(t, db, systemd.ApprovalsSocketPath, systemd.OperatorUser, systemd.ApproversGroup, systemd.ApprovalsSocketMode))
	entries, _ := os.ReadDir(t.abs(rel(systemd.HostRuntimeDir)))
	var routes []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".sock") {
			routes = append(routes, e.Name())
		}
	}
	sort.Strings(routes)
	for _, r := range routes {
		out = append(out, socketFinding(t, db, filepath.Join(systemd.HostRuntimeDir, r),
			systemd.OperatorUser, systemd.ControllerUser, systemd.RouteSocketMode))
	}
	return out
}

// socketFinding checks the socket at path (absolute on the real system)
// against its owner and mode: ok, absent (nobody listens: no installation
// fault) or differs.
func socketFinding(t tree, db *accountDB, path, user, group string, mode uint32) finding {
	f := finding{Kind: "socket", Name: t.abs(rel(path))}
	st, ok := lstatAs(t, rel(path), unix.S_IFSOCK, mode, &f)
	switch {
	case !ok && f.State == stateMissing:
		// An absent socket is no installation fault.
		f.State, f.Detail = stateAbsent, "nobody listens (unit not started)"
	case !ok:
	case t.real && ownerDiff(db, st.Uid, st.Gid, user, group) != "":
		f.State, f.Detail = stateDiffers, ownerDiff(db, st.Uid, st.Gid, user, group)
	default:
		f.State, f.Detail = stateOK, fmt.Sprintf("%s:%s %04o", user, group, mode)
	}
	return f
}

// sdBooted reports whether systemd runs this machine (sd_booted(3)).
func sdBooted() bool {
	fi, err := os.Lstat("/run/systemd/system")
	return err == nil && fi.IsDir()
}

// unitState is what `systemctl show` says of a unit.
type unitState struct {
	Active, Sub, Status string
}

// parseShow reads the KEY=VALUE lines of `systemctl show`.
func parseShow(b []byte) (unitState, error) {
	var u unitState
	seen := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			return unitState{}, fmt.Errorf("systemctl show: line %q is not KEY=VALUE", sc.Text())
		}
		switch k {
		case "ActiveState":
			u.Active, seen = v, seen|1
		case "SubState":
			u.Sub, seen = v, seen|2
		case "StatusText":
			u.Status = v
		}
	}
	if seen != 3 {
		return unitState{}, fmt.Errorf("systemctl show: no ActiveState or SubState in %q", oneLine(b))
	}
	return u, nil
}

func showUnit(ctx context.Context, unit string) (unitState, error) {
	systemctl, err := findTool("systemctl", "systemd")
	if err != nil {
		return unitState{}, err
	}
	cmd := exec.CommandContext(ctx, systemctl, "show", "--no-pager",
		"--property=ActiveState", "--property=SubState", "--property=StatusText", unit)
	cmd.Env = []string{"PATH=" + strings.Join(toolDirs, ":"), "LC_ALL=C"}
	out, err := cmd.Output()
	if err != nil {
		return unitState{}, fmt.Errorf("systemctl show %s: %v", unit, err)
	}
	return parseShow(out)
}

// readiness turns a service's state into a finding: a Type=notify service
// is "active" only after it sent READY=1.
func readiness(unit string, u unitState) finding {
	f := finding{Kind: "daemon", Name: unit, Detail: u.Active + "/" + u.Sub}
	switch u.Active {
	case "active", "reloading":
		f.State = stateOK
		f.Detail = "ready (" + f.Detail + ")"
	case "activating":
		f.State = stateDown
		f.Detail = "starting, READY=1 not sent yet (" + f.Detail + ")"
	default:
		f.State = stateDown
	}
	if u.Status != "" {
		f.Detail += ": " + u.Status
	}
	return f
}

func daemonFindings(ctx context.Context) []finding {
	var out []finding
	for _, unit := range []string{systemd.OperatorService, systemd.ControllerService} {
		if !sdBooted() {
			out = append(out, finding{Kind: "daemon", Name: unit, State: stateUnknown,
				Detail: "systemd is not running here (no /run/systemd/system)"})
			continue
		}
		u, err := showUnit(ctx, unit)
		if err != nil {
			out = append(out, finding{Kind: "daemon", Name: unit, State: stateUnknown, Detail: err.Error()})
			continue
		}
		out = append(out, readiness(unit, u))
	}
	return out
}

// activeUnits lists steward's units systemd is running, which uninstall
// must not pull the files from under.
func activeUnits(ctx context.Context) ([]string, error) {
	if !sdBooted() {
		return nil, nil
	}
	units := []string{systemd.OperatorService, systemd.ControllerService}
	for _, s := range systemd.Sockets() {
		units = append(units, s.Unit)
	}
	var active []string
	for _, unit := range units {
		u, err := showUnit(ctx, unit)
		if err != nil {
			return nil, err
		}
		switch u.Active {
		case "active", "activating", "reloading", "deactivating":
			active = append(active, unit)
		}
	}
	return active, nil
}
