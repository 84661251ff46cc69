package systemd

// Accounts. They are static system accounts declared in the sysusers.d file
// that Render produces; each user gets a primary group of the same name.
const (
	// OperatorUser is the account of `steward-operator serve` (the host).
	OperatorUser = "steward-operator"
	// ControllerUser is the account of `steward-controller serve`.
	ControllerUser = "steward-controller"
	// AgentsGroup is the group whose members may connect to the MCP socket
	// (the controller still checks each peer against its allow-list).
	AgentsGroup = "steward-agents"
	// ApproversGroup is the group whose members may answer asks through
	// the host's approvals socket (ApprovalsSocketPath): the approvals
	// verbs only, each answer recorded with the member's account.
	ApproversGroup = "steward-approvers"
)

// Groups are the groups the sysusers.d file creates beside each user's
// own primary group, in the order it declares them.
func Groups() []string { return []string{AgentsGroup, ApproversGroup} }

// Unit names, as installed under /etc/systemd/system.
const (
	OperatorService            = "steward-operator.service"
	ControllerService          = "steward-controller.service"
	ControllerForegroundSocket = "steward-controller-foreground.socket"
	ControllerMCPSocket        = "steward-controller-mcp.socket"
)

// File descriptor names of the controller's socket-activated listeners, as
// Listeners returns them (FileDescriptorName= in each .socket unit). The
// reverse socket has none: the controller binds it itself (see Sockets).
const (
	FDForeground = "foreground"
	FDMCP        = "mcp"
)

// Directories and socket paths of DESIGN.md section 2.
const (
	OperatorStateDir     = "/var/lib/steward-operator"
	ControllerStateDir   = "/var/lib/steward-controller"
	RuntimeDir           = "/run/steward"
	HostRuntimeDir       = "/run/steward/host"
	ControllerRuntimeDir = "/run/steward/controller"
	ReverseSocketPath    = "/run/steward/controller/reverse.sock"
	ForegroundSocketPath = "/run/steward/controller/foreground.sock"
	MCPSocketPath        = "/run/steward/controller/mcp.sock"
	// AdvisorSocketPath is where the controller serves advisor agents
	// (its config's sockets.advisor), beside mcp.sock: bound by the
	// controller itself, as mcp-http.sock is.
	AdvisorSocketPath = "/run/steward/controller/advisor.sock"
	// ApprovalsRuntimeDir holds the host's approvals socket, which admits
	// the host's account and members of ApproversGroup.
	ApprovalsRuntimeDir = "/run/steward/approvals"
	// ApprovalsSocketPath is the host's approvals socket
	// (`steward-operator serve --approvals-socket`), mode
	// ApprovalsSocketMode, its group ApproversGroup through the
	// directory's setgid bit.
	ApprovalsSocketPath = "/run/steward/approvals/approvals.sock"

	// DefaultOperatorStore is the operator's store, inside its StateDirectory.
	DefaultOperatorStore = OperatorStateDir + "/store"
	// DefaultControllerConfig is the controller's installed config, inside
	// its StateDirectory.
	DefaultControllerConfig = ControllerStateDir + "/config.json"
	// DefaultControllerBundle is where steward-installer bundle-install
	// puts the host bundle when no controller config names another path.
	DefaultControllerBundle = ControllerStateDir + "/host.bundle"

	// RouteSocketMode is the mode of each /run/steward/host/ROUTE.sock the
	// host creates (owner steward-operator, group steward-controller through
	// the directory's setgid bit), and of each controller's control socket
	// there (ControlSocketPath).
	RouteSocketMode = 0o660

	// ReverseSocketMode is the mode of ReverseSocketPath, which the
	// controller binds itself (owner steward-controller, group
	// steward-operator through ControllerRuntimeDir's setgid bit).
	ReverseSocketMode = 0o660

	// ApprovalsSocketMode is the mode of ApprovalsSocketPath.
	ApprovalsSocketMode = 0o660
)

// ControlSocketPath is where the host listens for controller's control
// channel (its live routes, inspect and allowance) in this layout: beside
// the routes' forward sockets in HostRuntimeDir, the path `steward-operator
// controller add --control` records.
func ControlSocketPath(controller string) string {
	return HostRuntimeDir + "/control-" + controller + ".sock"
}

// Paths of the rendered files, relative to the root of the tree they are
// installed into ("/" for a real install). Render's map is keyed by these.
const (
	UnitDir      = "etc/systemd/system"
	SysusersFile = "etc/sysusers.d/steward.conf"
	TmpfilesFile = "etc/tmpfiles.d/steward.conf"
)

// Dir is one directory steward needs, with its owner, group and mode.
type Dir struct {
	Path  string // absolute
	User  string
	Group string
	// Mode holds the permission bits including setuid/setgid/sticky, as
	// chmod(2) takes them (for example 0o2750).
	Mode uint32
	// Runtime directories live under /run: they are recreated at every boot
	// from the tmpfiles.d file and removed by uninstall. The others are
	// state directories (systemd's StateDirectory=), kept unless purged.
	Runtime bool
}

// Dirs lists steward's directories, parents before children.
//
// Why these modes:
//   - /run/steward/host is 2750 steward-operator:steward-controller. The host
//     binds one socket per route there and one control socket per
//     controller (ControlSocketPath); the controller (primary group
//     steward-controller) may traverse it and nobody else may. The setgid bit
//     makes every socket created inside belong to group steward-controller
//     from the moment it exists, so the host only has to create it with mode
//     0660 (umask 0117 around bind, or bind in a private directory and
//     rename in), never chown or chmod it after listen.
//   - /run/steward/controller is 2751 steward-controller:steward-operator,
//     not the 0750 of DESIGN.md: the MCP socket inside must be reachable by
//     agents (group steward-agents), who are in neither group. Others may
//     traverse but not list it; every socket inside is guarded by its own
//     owner and mode (see Sockets) and by SO_PEERCRED. The setgid bit gives
//     the reverse socket, which the controller binds itself, the host's
//     group from the moment it exists, as on /run/steward/host.
//   - /run/steward/approvals is 2750 steward-operator:steward-approvers:
//     the host binds its approvals socket there, and only the approvers
//     (and the host) may traverse it; the setgid bit gives the socket the
//     approvers' group from the moment it exists, and the host checks
//     every peer's groups at accept all the same.
//   - RuntimeDirectory= cannot express either: systemd makes a runtime
//     directory owned by the service's own User= and Group=, and each of
//     these directories must belong to the other account's group. So they
//     come from tmpfiles.d (created at boot before any socket or service),
//     and the host unit lists /run/steward/host in ReadWritePaths=.
func Dirs() []Dir {
	return []Dir{
		{Path: RuntimeDir, User: "root", Group: "root", Mode: 0o755, Runtime: true},
		{Path: HostRuntimeDir, User: OperatorUser, Group: ControllerUser, Mode: 0o2750, Runtime: true},
		{Path: ControllerRuntimeDir, User: ControllerUser, Group: OperatorUser, Mode: 0o2751, Runtime: true},
		{Path: ApprovalsRuntimeDir, User: OperatorUser, Group: ApproversGroup, Mode: 0o2750, Runtime: true},
		{Path: OperatorStateDir, User: OperatorUser, Group: OperatorUser, Mode: 0o700},
		{Path: ControllerStateDir, User: ControllerUser, Group: ControllerUser, Mode: 0o700},
	}
}

// Socket is one socket-activated listener of the controller.
type Socket struct {
	Unit   string // the .socket unit
	FDName string // its FileDescriptorName=, the key in Listeners' map
	Path   string
	User   string
	Group  string
	Mode   uint32
}

// Sockets lists the controller's socket-activated listeners. systemd
// creates each from its .socket unit with this owner and mode before the
// controller starts, so the controller never creates or chmods them, and
// an agent's or the installer's connection starts a stopped controller.
//
// The reverse socket is not among them: the controller binds
// ReverseSocketPath itself, mode 0660 in the setgid ControllerRuntimeDir.
// SO_PEERCRED on a connection to a listener names whoever called listen(2),
// and for a socket systemd made that is pid 1 (uid 0), so the host could
// not know it was handing a reservation to the controller's account. The
// host dials the reverse socket only while a dispatch the controller sent
// is pending, so the controller is always running then and activation
// would buy nothing.
//
// The foreground socket belongs to the controller's account (0600): the
// installer becomes that account before it dials (wire.DialOwned admits
// the root listener systemd makes for it), and the controller admits root
// and its own uid on it.
func Sockets() []Socket {
	return []Socket{
		{Unit: ControllerForegroundSocket, FDName: FDForeground, Path: ForegroundSocketPath,
			User: ControllerUser, Group: ControllerUser, Mode: 0o600},
		{Unit: ControllerMCPSocket, FDName: FDMCP, Path: MCPSocketPath,
			User: ControllerUser, Group: AgentsGroup, Mode: 0o660},
	}
}
