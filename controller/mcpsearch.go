package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stewardrt/steward/wire/msg"
)

// This file is a search across applications as an MCP tool's answer:
// oracle_discover's arguments read, the search run (search.go), and its
// SearchResult wrapped as structured content with a text reading of its
// own. search.go knows nothing of MCP; mcp.go's toolHandler calls here.

// searchTool answers an oracle_discover that is a search across
// applications (DiscoverArgs.acrossApplications); ok false for any other,
// which the caller runs as one request.
func (c *Controller) searchTool(ctx context.Context, raw []byte, agent string) (res *mcp.CallToolResult, ok bool) {
	var a DiscoverArgs
	canon, err := decodeArgs(raw, &a)
	if err != nil || !a.acrossApplications() {
		return nil, false // plan refuses it, or it is one application's
	}
	r, err := c.searchAcross(ctx, canon, a, agent)
	if err != nil {
		return searchRefusal(msg.CodeBadRequest, err.Error()), true
	}
	return r.toolResult(), true
}

// searchRefusal answers a search refused before any application was
// asked, in a refusal's usual shape.
func searchRefusal(code, reason string) *mcp.CallToolResult {
	res, _ := structured(refused(code, reason, ""), "", true) // a ToolResult always encodes
	return res
}

// toolResult is the MCP answer of a search: its JSON as structured
// content, and as text the matches one line each, the closest match's
// input schema, then the applications not searched and why. It is an
// error only when no application answered.
func (r *SearchResult) toolResult() *mcp.CallToolResult {
	res, _ := structured(r, r.text(), r.Outcome != msg.StateDefinite) // a SearchResult always encodes
	return res
}

// text is the search as an agent reads it.
func (r *SearchResult) text() string {
	var s strings.Builder
	if r.Refusal != nil {
		fmt.Fprintf(&s, "refused (%s): %s\n", r.Refusal.Code, r.Refusal.Reason)
	} else if len(r.Matches) == 0 {
		s.WriteString("no operation matches\n")
	}
	for _, m := range r.Matches {
		fmt.Fprintf(&s, "%s  %s [%s]\n", m.Address, m.Title, m.Availability)
	}
	if r.Closest != nil {
		fmt.Fprintf(&s, "\nclosest: %s, input schema:\n", r.Closest.Address)
		var ind bytes.Buffer
		if json.Indent(&ind, r.Closest.InputSchema, "", "  ") == nil {
			s.Write(ind.Bytes())
		} else {
			s.Write(r.Closest.InputSchema)
		}
		s.WriteString("\n")
	}
	first := true
	for _, a := range r.Applications {
		if a.searched {
			continue
		}
		if first {
			s.WriteString("\n")
			first = false
		}
		if a.Outcome == msg.StateDefinite {
			fmt.Fprintf(&s, "%s: %s\n", a.Application, a.Detail) // says why its answer is no listing
			continue
		}
		why := a.Detail
		if a.Refusal != nil {
			why = joinDetail(a.Refusal.Reason, a.Detail)
			fmt.Fprintf(&s, "%s: not searched: %s (%s): %s\n", a.Application, a.Outcome, a.Refusal.Code, why)
		} else {
			fmt.Fprintf(&s, "%s: not searched: %s: %s\n", a.Application, a.Outcome, why)
		}
	}
	return strings.TrimSuffix(s.String(), "\n")
}
