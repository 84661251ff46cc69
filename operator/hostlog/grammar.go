package hostlog

import (
	"fmt"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire/msg"
)

// What a record may hold: the bounds every name, pattern, route record and
// agent's limits record is held to, when the operator's commands make one
// and when replay reads one back, so that a record the host holds never
// carries what no command could have made. Each check returns one line
// saying what is refused; the store words it as a refusal of its input
// (views.ErrRefused).

// Name bounds: controller, application, route and grant names.
const MaxNameLen = 64

// ValidName checks a name: 1 to 64 of A-Za-z0-9._-, first a letter or digit.
func ValidName(what, s string) error {
	if len(s) == 0 || len(s) > MaxNameLen {
		return fmt.Errorf("%s name %s: must be 1 to %d bytes", what, strconv.Quote(Trunc(s, 80)), MaxNameLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return fmt.Errorf("%s name %s: only A-Za-z0-9._- allowed, first a letter or digit", what, strconv.Quote(Trunc(s, 80)))
		}
	}
	return nil
}

// Grant pattern bounds.
const (
	MaxPatterns   = 64
	MaxPatternLen = 160
)

// ValidPatterns checks a grant's operation patterns: at most MaxPatterns,
// each 1 to MaxPatternLen bytes and valid for path.Match.
func ValidPatterns(ps []string) error {
	if len(ps) > MaxPatterns {
		return fmt.Errorf("%d operation patterns, the bound is %d", len(ps), MaxPatterns)
	}
	for _, p := range ps {
		if p == "" || len(p) > MaxPatternLen {
			return fmt.Errorf("operation pattern %s: must be 1 to %d bytes", strconv.Quote(Trunc(p, 80)), MaxPatternLen)
		}
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("operation pattern %s: %v", strconv.Quote(p), err)
		}
	}
	return nil
}

// Route timeout bounds, in ms.
const (
	MaxConnectMs  = 10_000
	MaxResponseMs = 300_000
	MaxPathLen    = 107 // sun_path holds 108 bytes with the NUL
)

// ValidRouteRecord checks a route record's own fields: its application's
// name, the protocol, three distinct clean absolute socket paths within
// MaxPathLen, the prefix, the application's account and the timeouts.
func ValidRouteRecord(r msg.RouteRecord) error {
	if err := ValidName("application", r.Application); err != nil {
		return err
	}
	if r.Protocol != msg.ProtocolOracleOperationsV1 {
		return fmt.Errorf("route %s: unknown protocol %s", r.Route, strconv.Quote(r.Protocol))
	}
	for _, p := range []struct{ what, path string }{{"upstream", r.Upstream}, {"forward", r.Forward}, {"reverse", r.Reverse}} {
		if !filepath.IsAbs(p.path) || filepath.Clean(p.path) != p.path {
			return fmt.Errorf("route %s: %s socket %s must be a clean absolute path", r.Route, p.what, strconv.Quote(Trunc(p.path, 120)))
		}
		if len(p.path) > MaxPathLen {
			return fmt.Errorf("route %s: %s socket path of %d bytes exceeds the bound of %d", r.Route, p.what, len(p.path), MaxPathLen)
		}
	}
	if r.Forward == r.Upstream || r.Forward == r.Reverse || r.Upstream == r.Reverse {
		return fmt.Errorf("route %s: the upstream, forward and reverse sockets must differ", r.Route)
	}
	if err := oracleops.ValidatePrefix(r.Prefix); err != nil {
		return fmt.Errorf("route %s: %v", r.Route, err)
	}
	if err := validAppAccount(r.Route, r.AppAccount); err != nil {
		return err
	}
	if r.Timeouts.ConnectMs < 1 || r.Timeouts.ConnectMs > MaxConnectMs {
		return fmt.Errorf("route %s: connect timeout %d ms is outside 1 to %d", r.Route, r.Timeouts.ConnectMs, MaxConnectMs)
	}
	if r.Timeouts.ResponseMs < 1 || r.Timeouts.ResponseMs > MaxResponseMs {
		return fmt.Errorf("route %s: response timeout %d ms is outside 1 to %d", r.Route, r.Timeouts.ResponseMs, MaxResponseMs)
	}
	return nil
}

// maxAppAccount bounds a route's application account name: the longest
// account name useradd accepts.
const maxAppAccount = 32

// validAppAccount checks a route's AppAccount: empty (a route that names
// no account, dialled unchecked), or 1 to 32 of A-Za-z0-9._-, first a letter
// or '_', as useradd accepts; never all digits, so a name is never read as
// a uid. Whether the account exists is the host's question when it dials:
// a route may be registered before its application's account is made.
func validAppAccount(route, name string) error {
	if name == "" {
		return nil
	}
	if len(name) > maxAppAccount {
		return fmt.Errorf("route %s: application account %s: must be 1 to %d bytes", route, strconv.Quote(Trunc(name, 40)), maxAppAccount)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
		if !letter && (i == 0 || !(c >= '0' && c <= '9' || c == '.' || c == '-')) {
			return fmt.Errorf("route %s: application account %s: only A-Za-z0-9._- allowed, first a letter or '_'", route, strconv.Quote(name))
		}
	}
	return nil
}

// Agent name bounds (P1.6): 1 to 32 of a-z0-9_-, first a letter.
const MaxAgentName = 32

// Rate bounds of an agent's limits: the bucket is kept in exact integers
// (tokenUnit a call), which these keep far from overflow.
const (
	MaxAgentRate  = 1_000_000 // calls per minute
	MaxAgentBurst = 10_000    // calls at once
)

// AgentForeground is the principal of the controller's foreground socket:
// reserved, so that no configured agent is named like it.
const AgentForeground = "foreground"

// ValidAgentName checks the name of a configured agent, as `agent set`
// takes it: "foreground" and names with ':' ("uid:N") are the principals
// of the foreground socket and of legacy allow-list entries.
func ValidAgentName(s string) error {
	if s == AgentForeground {
		return fmt.Errorf("agent name %q is reserved for the foreground socket", s)
	}
	if strings.Contains(s, ":") {
		return fmt.Errorf("agent name %s: ':' is reserved (uid:N names a legacy allow-list peer)", strconv.Quote(Trunc(s, 80)))
	}
	ok := len(s) >= 1 && len(s) <= MaxAgentName && s[0] >= 'a' && s[0] <= 'z'
	for i := 0; ok && i < len(s); i++ {
		c := s[i]
		ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-'
	}
	if !ok {
		return fmt.Errorf("agent name %s: must be 1 to %d of a-z0-9_-, first a letter", strconv.Quote(Trunc(s, 80)), MaxAgentName)
	}
	return nil
}

// ValidDispatchAgent checks a dispatch's agent: a configured agent's
// name, "foreground" or "uid:N".
func ValidDispatchAgent(s string) error {
	if s == AgentForeground {
		return nil
	}
	if n, ok := strings.CutPrefix(s, "uid:"); ok {
		if v, err := strconv.ParseUint(n, 10, 32); err == nil && strconv.FormatUint(v, 10) == n {
			return nil
		}
	} else if ValidAgentName(s) == nil {
		return nil
	}
	return fmt.Errorf("agent %s is none of a configured agent's name, %s and uid:N", strconv.Quote(Trunc(s, 80)), AgentForeground)
}

// validLimitsAgent checks the agent a limits record names: any principal
// a dispatch can name (a configured agent's name, "foreground" or
// "uid:N"), so that every caller can be limited and marked for approval,
// the foreground socket's and a legacy allow-list peer's too; or
// msg.DefaultAgent, the controller's default record.
func validLimitsAgent(s string) error {
	if s == msg.DefaultAgent || ValidDispatchAgent(s) == nil {
		return nil
	}
	if strings.HasPrefix(s, "uid:") {
		return fmt.Errorf("agent %s: uid:N names a legacy allow-list peer by its uid, in decimal (0 to 4294967295)", strconv.Quote(Trunc(s, 80)))
	}
	return ValidAgentName(s)
}

// ValidAgentLimits checks the bounds of l (msg.MaxAgentOperations
// patterns, each APPLICATION/OPERATION and valid for path.Match;
// msg.MaxConversationsPerDay; a rate of at least 1, a burst only with a
// rate).
func ValidAgentLimits(l *msg.AgentLimits) error {
	if err := validLimitsAgent(l.Agent); err != nil {
		return err
	}
	if err := ValidName("controller", l.Controller); err != nil {
		return err
	}
	if len(l.Operations) > msg.MaxAgentOperations {
		return fmt.Errorf("agent %s: %d operation patterns, the bound is %d", l.Agent, len(l.Operations), msg.MaxAgentOperations)
	}
	for _, p := range l.Operations {
		app, op, ok := strings.Cut(p, "/")
		if len(p) > MaxPatternLen || !ok || app == "" || op == "" || strings.Contains(op, "/") {
			return fmt.Errorf("agent %s: operation pattern %s: must be APPLICATION/OPERATION, at most %d bytes", l.Agent, strconv.Quote(Trunc(p, 80)), MaxPatternLen)
		}
		for _, side := range []string{app, op} {
			if _, err := path.Match(side, ""); err != nil {
				return fmt.Errorf("agent %s: operation pattern %s: %v", l.Agent, strconv.Quote(p), err)
			}
		}
	}
	if l.ConversationsPerDay > msg.MaxConversationsPerDay {
		return fmt.Errorf("agent %s: %d conversations per day, the bound is %d", l.Agent, l.ConversationsPerDay, msg.MaxConversationsPerDay)
	}
	if l.RatePerMinute != nil && *l.RatePerMinute == 0 {
		return fmt.Errorf("agent %s: a rate of 0 calls per minute admits nothing: give --calls-per-day 0 to stop the agent", l.Agent)
	}
	if l.RatePerMinute != nil && *l.RatePerMinute > MaxAgentRate {
		return fmt.Errorf("agent %s: a rate of %d calls per minute, the bound is %d", l.Agent, *l.RatePerMinute, MaxAgentRate)
	}
	if l.Burst > MaxAgentBurst {
		return fmt.Errorf("agent %s: a burst of %d calls, the bound is %d", l.Agent, l.Burst, MaxAgentBurst)
	}
	if l.RatePerMinute == nil && l.Burst != 0 {
		return fmt.Errorf("agent %s: a burst needs a rate (--rate)", l.Agent)
	}
	if l.Revision == 0 {
		return fmt.Errorf("agent %s: revision 0: the first record of an agent is revision 1", l.Agent)
	}
	return validApprovalPolicy(l.Agent, l.Approval)
}

// Bounds of a policy's times that msg does not name: a park shorter than a
// second could not outlast one round trip of the controller's collect,
// and an ask that expires within a minute leaves no human time to answer.
const (
	MinApprovalPark   = time.Second
	MinApprovalExpiry = time.Minute
)

// validApprovalPolicy checks the approval policy of agent's limits: nil
// (no policy) passes. Durations are checked as they take effect (0 is the
// default), so a refusal names the value the host would use.
func validApprovalPolicy(agent string, p *msg.ApprovalPolicy) error {
	if p == nil {
		return nil
	}
	if err := validApprovalOperations(agent, p.Operations); err != nil {
		return err
	}
	if err := validApprovalTimes(agent, p); err != nil {
		return err
	}
	if p.OnTimeout != "" && p.OnTimeout != msg.VerdictApprove && p.OnTimeout != msg.VerdictDeny {
		return fmt.Errorf("agent %s: on-timeout verdict %s: must be approve or deny", agent, strconv.Quote(Trunc(string(p.OnTimeout), 80)))
	}
	if err := validAdvisors(agent, p.Advisors); err != nil {
		return err
	}
	if p.AgentAnswers != nil && *p.AgentAnswers > msg.MaxAgentAnswers {
		return fmt.Errorf("agent %s: %d agent answers per conversation, the bound is %d", agent, *p.AgentAnswers, msg.MaxAgentAnswers)
	}
	if p.AgentAnswersPerDay != nil && *p.AgentAnswersPerDay > msg.MaxAgentAnswersPerDay {
		return fmt.Errorf("agent %s: %d agent answers per day, the bound is %d", agent, *p.AgentAnswersPerDay, msg.MaxAgentAnswersPerDay)
	}
	return nil
}

// validApprovalOperations checks the marked patterns: at least one, at
// most msg.MaxApprovalOperations, each APPLICATION/OPERATION as the
// limits' own operation patterns (path.Match on each side).
func validApprovalOperations(agent string, ops []string) error {
	if len(ops) == 0 {
		return fmt.Errorf("agent %s: an approval policy that marks no operation: give --approve-ops APP/OP", agent)
	}
	if len(ops) > msg.MaxApprovalOperations {
		return fmt.Errorf("agent %s: %d approval patterns, the bound is %d", agent, len(ops), msg.MaxApprovalOperations)
	}
	for _, p := range ops {
		app, op, ok := strings.Cut(p, "/")
		if len(p) > MaxPatternLen || !ok || app == "" || op == "" || strings.Contains(op, "/") {
			return fmt.Errorf("agent %s: approval pattern %s: must be APPLICATION/OPERATION, at most %d bytes", agent, strconv.Quote(Trunc(p, 80)), MaxPatternLen)
		}
		for _, side := range []string{app, op} {
			if _, err := path.Match(side, ""); err != nil {
				return fmt.Errorf("agent %s: approval pattern %s: %v", agent, strconv.Quote(p), err)
			}
		}
	}
	return nil
}

// validApprovalTimes checks the park window (MinApprovalPark to
// msg.MaxApprovalPark, and no longer than the expiry: a call never parks
// past its ask's end) and the expiry (MinApprovalExpiry to
// msg.MaxApprovalExpiry). A negative value is refused as what it is.
func validApprovalTimes(agent string, p *msg.ApprovalPolicy) error {
	park, expiry := p.Park(), p.Expiry()
	if p.ParkMs < 0 || park < MinApprovalPark || park > msg.MaxApprovalPark {
		return fmt.Errorf("agent %s: a park of %v: must be %v to %v", agent, time.Duration(p.ParkMs)*time.Millisecond, MinApprovalPark, msg.MaxApprovalPark)
	}
	if p.ExpiryMs < 0 || expiry < MinApprovalExpiry || expiry > msg.MaxApprovalExpiry {
		return fmt.Errorf("agent %s: an ask expiry of %v: must be %v to %v", agent, time.Duration(p.ExpiryMs)*time.Millisecond, MinApprovalExpiry, msg.MaxApprovalExpiry)
	}
	if park > expiry {
		return fmt.Errorf("agent %s: a park of %v is longer than the ask expiry of %v", agent, park, expiry)
	}
	return nil
}

// validAdvisors checks the advisors: at most msg.MaxAdvisors configured
// agents' names, each once, never the agent itself (an advisor never
// answers an ask its own identity raised).
func validAdvisors(agent string, advisors []string) error {
	if len(advisors) > msg.MaxAdvisors {
		return fmt.Errorf("agent %s: %d advisors, the bound is %d", agent, len(advisors), msg.MaxAdvisors)
	}
	seen := make(map[string]bool, len(advisors))
	for _, a := range advisors {
		if err := ValidAgentName(a); err != nil {
			return fmt.Errorf("agent %s: advisor: %v", agent, err)
		}
		if a == agent {
			return fmt.Errorf("agent %s: an agent is never its own advisor (an advisor never answers an ask raised by its own identity)", agent)
		}
		if seen[a] {
			return fmt.Errorf("agent %s: advisor %s is named twice", agent, a)
		}
		seen[a] = true
	}
	return nil
}

// Trunc cuts s to at most n bytes, "..." marking a cut: a refusal quotes
// what it refused, and a line of it stays short.
func Trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// MaxAttemptID bounds an attempt id: 1 to 80 of A-Za-z0-9_-.
const MaxAttemptID = 80

func ValidAttemptID(s string) error {
	if len(s) == 0 || len(s) > MaxAttemptID {
		return fmt.Errorf("attempt id of %d bytes: must be 1 to %d", len(s), MaxAttemptID)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("attempt id: byte %d is not one of A-Za-z0-9_-", i)
		}
	}
	return nil
}

// LineWithin is why text (what) is not one line of min to max bytes of
// UTF-8, or "".
func LineWithin(what, text string, minLen, maxLen int) string {
	switch {
	case len(text) < minLen:
		return what + " is empty"
	case len(text) > maxLen:
		return fmt.Sprintf("%s of %d bytes is over the bound of %d", what, len(text), maxLen)
	case !utf8.ValidString(text):
		return what + " is not UTF-8"
	case msg.LineBreakAt(text) >= 0:
		return what + " must be one line"
	}
	return ""
}

// quoteLine is s on one line (line breaks as spaces), cut to at most n bytes
// at a character boundary, "..." marking a cut.
func QuoteLine(s string, n int) string {
	s = strings.ToValidUTF8(strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s), "\uFFFD")
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
