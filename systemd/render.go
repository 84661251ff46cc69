package systemd

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"path"
	"strings"
	"text/template"
	"time"
)

//go:embed templates/*.tmpl
var templateFS embed.FS

var templates = template.Must(template.New("").Funcs(template.FuncMap{
	"octal": func(m uint32) string { return fmt.Sprintf("%04o", m) },
}).ParseFS(templateFS, "templates/*.tmpl"))

// Watchdog is the WatchdogSec= of both services. StartWatchdog pings at half
// of it, as systemd advises.
const Watchdog = 30 * time.Second

// ErrParams is wrapped by every error Render returns for unusable parameters.
var ErrParams = errors.New("invalid unit parameters")

// UnitParams are the installation-specific values the units are rendered with.
type UnitParams struct {
	// BinDir is the absolute directory holding steward-operator and
	// steward-controller. Required. `systemd-analyze verify` refuses a unit
	// whose ExecStart binary does not exist, so tests point it at binaries
	// they built.
	BinDir string
	// OperatorStore is the operator's store; "" means DefaultOperatorStore.
	// It must lie inside OperatorStateDir: ProtectSystem=strict leaves the
	// rest of the file system read-only to the host.
	OperatorStore string
	// ControllerConfig is the controller's installed config; "" means
	// DefaultControllerConfig. It must lie inside ControllerStateDir.
	ControllerConfig string
}

// Render produces steward's systemd files from p, keyed by their path
// relative to the root of the tree they are installed into (see UnitDir,
// SysusersFile, TmpfilesFile): the two services, the controller's three
// socket units, the sysusers.d file and the tmpfiles.d file. The output
// depends only on p.
func Render(p UnitParams) (map[string][]byte, error) {
	if p.OperatorStore == "" {
		p.OperatorStore = DefaultOperatorStore
	}
	if p.ControllerConfig == "" {
		p.ControllerConfig = DefaultControllerConfig
	}
	if err := checkUnitPath("BinDir", p.BinDir); err != nil {
		return nil, err
	}
	if err := checkUnitPath("OperatorStore", p.OperatorStore); err != nil {
		return nil, err
	}
	if err := checkUnitPath("ControllerConfig", p.ControllerConfig); err != nil {
		return nil, err
	}
	if !strings.HasPrefix(p.OperatorStore, OperatorStateDir+"/") {
		return nil, fmt.Errorf("%w: OperatorStore %q is not inside %s", ErrParams, p.OperatorStore, OperatorStateDir)
	}
	if !strings.HasPrefix(p.ControllerConfig, ControllerStateDir+"/") {
		return nil, fmt.Errorf("%w: ControllerConfig %q is not inside %s", ErrParams, p.ControllerConfig, ControllerStateDir)
	}

	var runtimeDirs []Dir
	for _, d := range Dirs() {
		if d.Runtime {
			runtimeDirs = append(runtimeDirs, d)
		}
	}
	data := map[string]any{
		"BinDir":               p.BinDir,
		"OperatorStore":        p.OperatorStore,
		"ControllerConfig":     p.ControllerConfig,
		"OperatorUser":         OperatorUser,
		"ControllerUser":       ControllerUser,
		"AgentsGroup":          AgentsGroup,
		"Groups":               Groups(),
		"ApproversGroup":       ApproversGroup,
		"ApprovalsRuntimeDir":  ApprovalsRuntimeDir,
		"ApprovalsSocketPath":  ApprovalsSocketPath,
		"OperatorStateDir":     OperatorStateDir,
		"ControllerStateDir":   ControllerStateDir,
		"OperatorStateName":    path.Base(OperatorStateDir),
		"ControllerStateName":  path.Base(ControllerStateDir),
		"HostRuntimeDir":       HostRuntimeDir,
		"ControllerRuntimeDir": ControllerRuntimeDir,
		"WatchdogSec":          fmt.Sprintf("%ds", int(Watchdog/time.Second)),
		"Sockets":              Sockets(),
		"RuntimeDirs":          octalDirs(runtimeDirs),
	}

	out := make(map[string][]byte)
	add := func(rel, tmpl string, d any) error {
		var b bytes.Buffer
		if err := templates.ExecuteTemplate(&b, tmpl, d); err != nil {
			return fmt.Errorf("render %s: %w", rel, err)
		}
		out[rel] = b.Bytes()
		return nil
	}
	if err := add(path.Join(UnitDir, OperatorService), "operator.service.tmpl", data); err != nil {
		return nil, err
	}
	if err := add(path.Join(UnitDir, ControllerService), "controller.service.tmpl", data); err != nil {
		return nil, err
	}
	for _, s := range Sockets() {
		d := map[string]any{
			"FDName":  s.FDName,
			"Path":    s.Path,
			"Service": ControllerService,
			"User":    s.User,
			"Group":   s.Group,
			"Mode":    fmt.Sprintf("%04o", s.Mode),
		}
		if err := add(path.Join(UnitDir, s.Unit), "controller.socket.tmpl", d); err != nil {
			return nil, err
		}
	}
	if err := add(SysusersFile, "sysusers.conf.tmpl", data); err != nil {
		return nil, err
	}
	if err := add(TmpfilesFile, "tmpfiles.conf.tmpl", data); err != nil {
		return nil, err
	}
	return out, nil
}

// octalDirs formats modes the way tmpfiles.d expects them.
func octalDirs(ds []Dir) []map[string]string {
	var out []map[string]string
	for _, d := range ds {
		out = append(out, map[string]string{
			"Path": d.Path, "User": d.User, "Group": d.Group, "Mode": fmt.Sprintf("%04o", d.Mode),
		})
	}
	return out
}

// checkUnitPath accepts a clean absolute path of plain characters only. A
// unit file would give meaning to the rest: whitespace splits ExecStart=
// arguments, '%' is a specifier, '$' expands a variable, quotes and
// backslashes are unquoted, and a newline would start a new directive.
func checkUnitPath(name, p string) error {
	if p == "" {
		return fmt.Errorf("%w: %s is empty", ErrParams, name)
	}
	if !path.IsAbs(p) || path.Clean(p) != p || p == "/" {
		return fmt.Errorf("%w: %s %q is not a clean absolute path", ErrParams, name, p)
	}
	for _, r := range p {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			strings.ContainsRune("/._+-", r)
		if !ok {
			return fmt.Errorf("%w: %s %q has character %q; only A-Z a-z 0-9 / . _ + - are allowed", ErrParams, name, p, r)
		}
	}
	return nil
}
