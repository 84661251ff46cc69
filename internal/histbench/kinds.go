package histbench

import (
	"fmt"
	"slices"
	"strings"

	"github.com/stewardrt/steward/controller/ledger"
	"github.com/stewardrt/steward/operator/hostlog"
)

// kindsOf are the record kinds of each journal that a generation of at
// least MinVarietyCalls calls holds, by daemon; absentKinds those it
// does not, with the reason (docs/HISTORY.md).
var (
	kindsOf = map[string][]string{
		"host": {"bind", hostlog.KindControllerAddV2, hostlog.KindPurseFund, hostlog.KindPurseFreeze, hostlog.KindPurseThaw,
			hostlog.KindGrantIssue, hostlog.KindGrantRevoke, hostlog.KindRouteRegisterV2, hostlog.KindRouteState,
			hostlog.KindReserveV2, hostlog.KindNotSentV2, hostlog.KindUncertain, hostlog.KindOutcomeV2, hostlog.KindRefused,
			hostlog.KindCheckpoint, hostlog.KindRedeliver, hostlog.KindResolve, hostlog.KindAgentLimits,
			hostlog.KindAsk, hostlog.KindAskAnswer, hostlog.KindAskExpired},
		"controller": {"bind", ledger.KindBegin, ledger.KindResult, ledger.KindResolveV2, ledger.KindFgSubmit,
			ledger.KindFgResult, ledger.KindFgAck, ledger.KindAwaiting, ledger.KindConsented},
		"appliance": {"bind", "answer"},
	}
	absentKinds = map[string]string{
		hostlog.KindControllerAdd:     "the first version, which the host no longer writes (controller-add.v2 is)",
		hostlog.KindRouteRegister:     "the first version (route-register.v2 is written)",
		hostlog.KindReserve:           "the first version (reserve.v2)",
		hostlog.KindNotSent:           "the first version (not-sent.v2)",
		hostlog.KindOutcome:           "the first version (outcome.v2)",
		hostlog.KindControllerControl: "the dev mode adds its controller with its control socket, and moving it would cut the controller off",
		ledger.KindResolve:            "the controller's first version (resolve.v2)",
		hostlog.KindAskWindow:         "only an ask approved by a host before collect windows gets one; every approval here carries its window",
		hostlog.KindAskLapsed:         "an approval lapses only when left uncollected for its ask's expiry (a minute at least); every approval here is collected at once",
		"rebind":                      "a journal's rebind is an enrollment's: the dev mode's configs never change",
	}
)

// MinVarietyCalls is the least generation whose bulk calls include one of
// each kind (bulk).
const MinVarietyCalls = 1000

// missingKinds names the kinds of kindsOf that the records of a point lack.
func missingKinds(records map[string]map[string]int) []string {
	var out []string
	for d, ks := range kindsOf {
		for _, k := range ks {
			if records[d][k] == 0 {
				out = append(out, d+" "+k)
			}
		}
	}
	slices.Sort(out)
	return out
}

// CheckKinds fails unless the last point of m holds every kind of kindsOf.
func CheckKinds(m *Meta) error {
	last := m.Points[len(m.Points)-1]
	if miss := missingKinds(last.Records); len(miss) > 0 {
		return fmt.Errorf("the generation of %d calls has no record of %s", last.Calls, strings.Join(miss, ", "))
	}
	return nil
}
