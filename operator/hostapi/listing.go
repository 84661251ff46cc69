package hostapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire/msg"
)

// MaxFilteredPages bounds the application's pages one filtered listing
// reads: oracleops.MaxLimit operations a page.
const MaxFilteredPages = 20

// errListTooLong refuses a filtered listing longer than MaxFilteredPages.
var errListTooLong = fmt.Errorf("the application lists more than %d operations", MaxFilteredPages*oracleops.MaxLimit)

// Filtered answers a listing of route rt's application through c, keeping
// the operations keeps reports covered (a grant's operation patterns, or
// its agent's, hide the others), without revealing what it hid: it reads
// the application's listing from its start (the agent's search text and
// availability, pages of oracleops.MaxLimit), keeps the covered
// operations, and pages over those itself. The agent's offset and limit
// count covered operations only, and next_offset is computed over them,
// so neither the offsets nor the page sizes let an agent count hidden
// operations. The first page's delivery decides not-sent; every page's
// delivery ends by cutoff (the dispatch's deadline plus
// msg.DeadlineTolerance); a later page that fails makes the listing
// uncertain, and an answer other than 200 is passed on as it is.
func Filtered(c Courier, rt *msg.RouteRecord, q oracleops.ListQuery, keeps func(op string) bool, cutoff time.Time) Delivery {
	if q.Limit == 0 {
		q.Limit = oracleops.DefaultLimit
	}
	var kept []json.RawMessage
	var limits json.RawMessage
	appOffset := 0
	for page := 0; ; page++ {
		if page == MaxFilteredPages {
			return Delivery{Sent: true, Status: http.StatusBadGateway, Body: filterFault("the application's listing is too long to filter by the grant"), Cause: errListTooLong}
		}
		req, err := oracleops.BuildList(rt.Prefix, oracleops.ListQuery{Query: q.Query, Availability: q.Availability, Limit: oracleops.MaxLimit, Offset: appOffset})
		if err != nil {
			return Delivery{Sent: page > 0, Detail: "the listing could not be paged", Err: "the listing could not be paged", Cause: err}
		}
		dl := c.Deliver(rt, req, cutoff)
		if !dl.Sent && page > 0 {
			dl.Sent, dl.Err = true, "a later page of the listing: "+dl.Detail
		}
		if !dl.Sent || dl.Err != "" || dl.Status != http.StatusOK {
			return dl
		}
		p, covered, err := oracleops.FilterPage(dl.Body, keeps)
		if err != nil {
			return Delivery{Sent: true, Status: http.StatusBadGateway, Body: filterFault("the application's listing could not be filtered by the grant"), Cause: err}
		}
		limits = p.Limits
		kept = append(kept, covered...)
		if len(kept) > q.Offset+q.Limit || p.NextOffset == nil {
			break
		}
		if *p.NextOffset <= appOffset {
			return Delivery{Sent: true, Status: http.StatusBadGateway, Body: filterFault("the application's listing could not be filtered by the grant"),
				Cause: fmt.Errorf("next_offset %d does not advance past offset %d", *p.NextOffset, appOffset)}
		}
		appOffset = *p.NextOffset
	}
	out := oracleops.FilteredPage{Limits: limits, Operations: []json.RawMessage{}}
	if q.Offset < len(kept) {
		out.Operations = kept[q.Offset:min(len(kept), q.Offset+q.Limit)]
	}
	if len(kept) > q.Offset+q.Limit {
		next := q.Offset + q.Limit
		out.NextOffset = &next
	}
	body, err := json.Marshal(out)
	if err != nil {
		return Delivery{Sent: true, Status: http.StatusBadGateway, Body: filterFault("the application's listing could not be filtered by the grant"), Cause: err}
	}
	return Delivery{Sent: true, Status: http.StatusOK, Body: body}
}

// filterFault is the body of a listing the host will not pass on: never an
// unfiltered listing, which would show operations the grant does not cover.
func filterFault(message string) []byte { return oracleops.FaultBody(message) }
