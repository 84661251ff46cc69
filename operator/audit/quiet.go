package audit

import (
	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
)

// The kinds that are no evidence about receipts or purses: the audit reads
// them (every record is decoded, strictly) and checks nothing of them. The
// operator's authority they carry (grants, routes and their states, a
// controller's control socket, a freeze) decides what the host admits, not
// what a receipt or a balance says; replay checks them.

func (a *journalAudit) ControllerControl(journal.Record, *hostlog.ControllerControl) error {
	return nil
}
func (a *journalAudit) PurseFreeze(journal.Record, *hostlog.Purse) error                 { return nil }
func (a *journalAudit) PurseThaw(journal.Record, *hostlog.Purse) error                   { return nil }
func (a *journalAudit) GrantIssue(journal.Record, *hostlog.GrantIssue) error             { return nil }
func (a *journalAudit) GrantRevoke(journal.Record, *hostlog.GrantRevoke) error           { return nil }
func (a *journalAudit) RouteRegister(journal.Record, *hostlog.RouteRegister) error       { return nil }
func (a *journalAudit) RouteRegisterV2(journal.Record, *hostlog.RouteRegisterV2) error   { return nil }
func (a *journalAudit) RouteStateChange(journal.Record, *hostlog.RouteStateChange) error { return nil }
