package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/stewardrt/steward/oracleops"
	"github.com/stewardrt/steward/wire/msg"
)

// searchParallel bounds the listings of one search across applications
// in flight at once: enough that a few slow applications do not add up,
// few enough that one agent's search does not take every application's
// capacity at once.
const searchParallel = 4

// SearchResult is the answer of oracle_discover without an application:
// one listing per application the controller may reach, each its own
// attempt (admission, consent, receipt), merged. Outcome is definite when
// at least one application's listing was read, refused otherwise.
type SearchResult struct {
	Outcome msg.State `json:"outcome"`
	Refusal *Refusal  `json:"refusal,omitempty"` // when every application failed
	// Charge is what the whole search was charged: the sum of the
	// applications' charges, each from its verified receipt.
	Charge       *uint64             `json:"charge,omitempty"`
	Matches      []SearchMatch       `json:"matches"`
	Closest      *SearchClosest      `json:"closest,omitempty"` // absent when nothing matched
	Applications []SearchApplication `json:"applications"`
}

// SearchMatch is one operation a search found, best first.
type SearchMatch struct {
	Address      string `json:"address"`
	Application  string `json:"application"`
	OperationID  string `json:"operationId"`
	Title        string `json:"title"`
	Availability string `json:"availability"`
}

// SearchClosest is the best match with what an oracle_call of it needs.
type SearchClosest struct {
	Address     string          `json:"address"`
	Title       string          `json:"title"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// SearchApplication is one application's part of a search: its own
// attempt's outcome, receipt and charge, or why it was not searched.
type SearchApplication struct {
	Application string    `json:"application"`
	Outcome     msg.State `json:"outcome"`
	AttemptID   string    `json:"attemptId,omitempty"`
	ReceiptID   string    `json:"receiptId,omitempty"`
	Charge      *uint64   `json:"charge,omitempty"`
	Refusal     *Refusal  `json:"refusal,omitempty"`
	Detail      string    `json:"detail,omitempty"`
	searched    bool      // its listing was read
}

// searchAcross lists the operations matching a of every application the
// controller may reach, each listing its own attempt through c.dispatch,
// at most searchParallel at once, and merges them. Its error is a refusal
// of the arguments: nothing was journaled or sent.
func (c *Controller) searchAcross(ctx context.Context, canon []byte, a DiscoverArgs, agent string) (*SearchResult, error) {
	if a.Offset != nil {
		return nil, argErr("offset: a search across applications is not paged (paging is per application: give application)")
	}
	q, err := listQuery(a)
	if err != nil {
		return nil, err
	}
	if q.Limit == 0 {
		q.Limit = oracleops.DefaultLimit
	}
	timeout, err := c.timeout(a.TimeoutMs)
	if err != nil {
		return nil, err
	}
	routes, err := c.liveRoutes(ctx)
	if err != nil {
		return &SearchResult{Outcome: msg.StateRefused, Matches: []SearchMatch{}, Applications: []SearchApplication{},
			Refusal: &Refusal{Code: msg.CodeUnavailable, Reason: "the host's routes could not be read: " + err.Error() + "; nothing was sent"}}, nil
	}
	results := c.outsideLimits(ctx, routes, agent)
	c.listEach(ctx, routes, results, canon, q, timeout, agent)
	return mergeSearch(q, routes, results), nil
}

// notInLimits is the entry of an application a search did not ask: the
// operator's limits for the agent name no operation of it, so its listing
// would be refused by the host, an attempt and a receipt for nothing.
const notInLimits = "not searched: the operator's limits for you allow no operation of this application; nothing was sent"

// outsideLimits is the search's results before any listing: for each route
// whose application the operator's limits for agent exclude (as the host
// reports them: allowance), a refusal naming that; nil for the others. A
// host that does not say leaves every application to be asked: its
// admission refuses what the limits exclude all the same.
func (c *Controller) outsideLimits(ctx context.Context, routes []msg.RouteRecord, agent string) []*ToolResult {
	results := make([]*ToolResult, len(routes))
	lim := c.allowance(ctx, agent)
	for i, r := range routes {
		if !lim.allows(r.Application) {
			results[i] = refused(msg.CodeAgentLimit, notInLimits, "")
		}
	}
	return results
}

// listEach runs one listing per route whose result is still nil, at most
// searchParallel at once, putting each result at its route's place. Every listing's
// deadline is the search's: timeout after the search began, so a listing
// that waited for its turn has less of it, and one whose turn came too
// late is not sent.
func (c *Controller) listEach(ctx context.Context, routes []msg.RouteRecord, results []*ToolResult, canon []byte, q oracleops.ListQuery, timeout time.Duration, agent string) {
	start := c.now()
	sem := make(chan struct{}, searchParallel)
	var wg sync.WaitGroup
	for i, r := range routes {
		if results[i] != nil {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if ctx.Err() != nil {
				// The agent gave up on the search: what has not begun is
				// not begun.
				results[i] = refused(msg.CodeUnavailable, "the search was cancelled before this application's turn; nothing was sent", "")
				return
			}
			left := timeout - c.now().Sub(start)
			if left <= 0 {
				results[i] = refused(msg.CodeDeadlinePassed, "the search's timeout passed before this application's turn; nothing was sent", "")
				return
			}
			p, err := listPlan(r, canon, q, left, agent)
			if err != nil {
				results[i] = refused(msg.CodeBadRequest, err.Error(), "")
				return
			}
			results[i] = c.dispatch(ctx, p, "")
		}()
	}
	wg.Wait()
}

// candidate is one operation of one application's listing.
type candidate struct {
	app   string
	index int // its place in the application's own answer
	rank  int
	desc  oracleops.Descriptor
}

// mergeSearch merges the listings (results[i] is routes[i]'s) into one
// answer: the matches ranked and capped at q.Limit, the closest with its
// input schema, and every application's own outcome.
func mergeSearch(q oracleops.ListQuery, routes []msg.RouteRecord, results []*ToolResult) *SearchResult {
	out := &SearchResult{Matches: []SearchMatch{}, Applications: make([]SearchApplication, len(routes))}
	var cands []candidate
	var total uint64
	charged, read := false, false
	var codes []string
	for i, r := range routes {
		t := results[i]
		app := r.Application
		e := SearchApplication{Application: app, Outcome: t.Outcome, AttemptID: t.AttemptID, ReceiptID: t.ReceiptID,
			Charge: t.Charge, Refusal: t.Refusal, Detail: t.Detail}
		if t.Charge != nil {
			total, charged = total+*t.Charge, true
		}
		lr, err := readListing(t)
		switch {
		case err != nil:
			e.Detail = joinDetail(e.Detail, err.Error())
			if t.Refusal != nil {
				codes = append(codes, t.Refusal.Code)
			}
		case t.Outcome != msg.StateDefinite:
			if t.Refusal != nil {
				codes = append(codes, t.Refusal.Code)
			}
		default:
			read, e.searched = true, true
			for j, d := range lr.Operations {
				cands = append(cands, candidate{app: app, index: j, rank: rankOf(q.Query, d), desc: d})
			}
			if lr.NextOffset != nil {
				e.Detail = joinDetail(e.Detail, fmt.Sprintf("more operations match: oracle_discover with application %s and offset %d shows them", app, *lr.NextOffset))
			}
		}
		out.Applications[i] = e
	}
	if charged {
		out.Charge = &total
	}
	if !read {
		out.Outcome, out.Refusal = msg.StateRefused, allFailed(codes, len(routes))
		return out
	}
	out.Outcome = msg.StateDefinite
	// Best rank first; within a rank, each application's own order, the
	// applications taking turns (routes are sorted by application).
	sort.SliceStable(cands, func(i, j int) bool {
		if cands[i].rank != cands[j].rank {
			return cands[i].rank < cands[j].rank
		}
		return cands[i].index < cands[j].index
	})
	if len(cands) > q.Limit {
		cands = cands[:q.Limit]
	}
	for _, m := range cands {
		out.Matches = append(out.Matches, SearchMatch{Address: formatAddress(m.app, m.desc.ID), Application: m.app,
			OperationID: m.desc.ID, Title: m.desc.Title, Availability: string(m.desc.Availability)})
	}
	if len(cands) > 0 {
		d := cands[0].desc
		out.Closest = &SearchClosest{Address: formatAddress(cands[0].app, d.ID), Title: d.Title, Description: d.Description, InputSchema: d.InputSchema}
	}
	return out
}

// allFailed is the refusal of a search no application answered: the
// applications' common refusal code when they share one.
func allFailed(codes []string, apps int) *Refusal {
	if apps == 0 {
		return &Refusal{Code: msg.CodeUnavailable, Reason: "no application is reachable: the host offers this controller no route; nothing was sent"}
	}
	code := msg.CodeUnavailable
	if len(codes) == apps {
		code = codes[0]
		for _, c := range codes {
			if c != code {
				code = msg.CodeUnavailable
			}
		}
	}
	return &Refusal{Code: code, Reason: fmt.Sprintf("none of the %d applications answered the search: each one's outcome is in applications", apps)}
}

// listingBytes is the application's answer to a listing as a dispatch
// reports it. It is the one place that reads the body out of a
// ToolResult, so that the result's shape can change in one place.
func listingBytes(t *ToolResult) []byte {
	if len(t.Body) > 0 {
		return t.Body
	}
	return []byte(t.BodyText) // not JSON: the listing is unreadable, as any non-JSON answer
}

// readListing is the listing one application answered, or why it has none.
// An attempt that did not end definite has no listing and no error: its
// outcome, refusal and detail already say why.
func readListing(t *ToolResult) (oracleops.ListReply, error) {
	switch {
	case t.Outcome != msg.StateDefinite:
		return oracleops.ListReply{}, nil
	case t.Status != 200:
		return oracleops.ListReply{}, fmt.Errorf("not searched: the application answered status %d", t.Status)
	}
	lr, err := oracleops.DecodeListReply(listingBytes(t))
	if err != nil {
		return oracleops.ListReply{}, fmt.Errorf("not searched: the application's listing could not be read: %v", err)
	}
	return lr, nil
}

func joinDetail(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// rankOf ranks an operation for query, best 0: its id is the query, its
// id starts with it, its id, title or description contains it (each
// without regard to case), or only the application's own search found it.
func rankOf(query string, d oracleops.Descriptor) int {
	if query == "" {
		return 3
	}
	lq, id := strings.ToLower(query), strings.ToLower(d.ID)
	switch {
	case id == lq:
		return 0
	case strings.HasPrefix(id, lq):
		return 1
	case strings.Contains(id, lq) || strings.Contains(strings.ToLower(d.Title), lq) || strings.Contains(strings.ToLower(d.Description), lq):
		return 2
	}
	return 3
}
