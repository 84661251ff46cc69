package controller

// The output schemas of the three tools: what their structured content
// is, for a client that checks it (the official TypeScript SDK client
// checks every structured content it gets against the tool's output
// schema, and refuses a result without one unless it is an error). They
// use only keywords that JSON Schema draft-07 (that client's default
// validator) and 2020-12 (go-sdk's) read alike, and leave
// additionalProperties open, so that a field added later does not break a
// client holding the older list. Every JSON field of the Go types they
// describe is declared (results_test.go checks both ways).

// toolResultProperties are ToolResult's fields.
func toolResultProperties() map[string]any {
	return map[string]any{
		"outcome": schemaText("where the call ended: definite (the application answered: see status and body), " +
			"refused (steward or the host refused it: see refusal; nothing was performed), not-sent (nothing reached the application), " +
			"uncertain (it may have been performed; see detail), performed (performed and charged by the operator's word, its answer never recorded), " +
			"awaiting-approval (not an error: the call waits for the operator's approval of its ask; call oracle_call again with the same requestId and arguments to collect the verdict)"),
		"status":   map[string]any{"type": "integer", "description": "the application's HTTP status, on a definite outcome: isError is false only for 2xx"},
		"body":     map[string]any{"description": "the application's answer, as JSON, when it answered JSON"},
		"bodyText": schemaText("the application's answer as text, when it is UTF-8 but not JSON"),
		"bodyBase64": map[string]any{"type": "string", "contentEncoding": "base64",
			"description": "the application's answer in base64, when it is not UTF-8"},
		"attemptId": schemaText("the attempt this call was, as the operator's records name it"),
		"receiptId": schemaText("the host's signed receipt of the attempt, by its hash"),
		"replayed":  map[string]any{"type": "boolean", "description": "true: the recorded answer of an earlier call with the same requestId, not performed or charged again"},
		"charge":    schemaCount("what this call was charged, in credits, from the host's receipt (0 for a replay)"),
		"callPrice": schemaCount("on a discovery: what an oracle_call of the operations it shows costs, in credits"),
		"refusal":   refusalSchema(),
		"detail":    schemaText("what is known of an outcome that is not definite"),
		"ask": map[string]any{"type": "object", "required": []string{"id"},
			"description": "the approval this call waits or waited for (an operation the operator marked for approval)",
			"properties": map[string]any{
				"id":        schemaText("the ask, as the operator's approvals commands name it"),
				"expiresAt": schemaText("while pending: when it expires unanswered (RFC 3339, UTC)"),
				"onTimeout": map[string]any{"type": "string", "enum": []string{"approve", "deny"}, "description": "while pending: what it expires to"},
			}},
		"answeredBy": schemaText(`who decided the ask, from the host's receipt: "uid:N" (a person's account), "agent:NAME" (an advisor agent) or "expiry"`),
	}
}

func refusalSchema() map[string]any {
	return map[string]any{"type": "object", "required": []string{"code", "reason"},
		"description": "why steward or the host refused the call",
		"properties": map[string]any{
			"code":   schemaText("the kind of refusal, e.g. bad-request, conflict, unavailable, uncertain"),
			"reason": schemaText("what was refused and why, in one line"),
		}}
}

// callOutputSchema is oracle_call's: a ToolResult.
func callOutputSchema() map[string]any {
	return map[string]any{"type": "object", "required": []string{"outcome"}, "properties": toolResultProperties()}
}

// discoverOutputSchema is oracle_discover's: a ToolResult, and the fields
// of a search across applications (matches, closest, applications), each
// optional.
func discoverOutputSchema() map[string]any {
	p := toolResultProperties()
	p["matches"] = map[string]any{"type": "array",
		"description": "a search across applications: the matching operations, best first",
		"items": map[string]any{"type": "object", "properties": map[string]any{
			"address":      schemaText(`the operation's address, "APPLICATION/OPERATION": oracle_call takes it`),
			"application":  schemaText("the application"),
			"operationId":  schemaText("the operation's id"),
			"title":        schemaText("the operation's title"),
			"availability": schemaText("live_direct (callable now), text_only or unavailable"),
		}}}
	p["closest"] = map[string]any{"type": "object",
		"description": "a search across applications: the best match, with its input schema (absent when nothing matched)",
		"properties": map[string]any{
			"address":     schemaText(`the operation's address, "APPLICATION/OPERATION"`),
			"title":       schemaText("the operation's title"),
			"description": schemaText("the operation's description"),
			"inputSchema": map[string]any{"description": "the JSON Schema oracle_call's arguments must be valid against"},
		}}
	p["applications"] = map[string]any{"type": "array",
		"description": "a search across applications: one entry per application searched, each its own attempt",
		"items": map[string]any{"type": "object", "properties": map[string]any{
			"application": schemaText("the application"),
			"outcome":     schemaText("where its search ended, as outcome"),
			"attemptId":   schemaText("its attempt"),
			"receiptId":   schemaText("its receipt, by hash"),
			"charge":      schemaCount("what its search was charged, in credits"),
			"refusal":     refusalSchema(),
			"detail":      schemaText("what is known of an outcome that is not definite"),
		}}}
	return map[string]any{"type": "object", "required": []string{"outcome"}, "properties": p}
}

// overviewOutputSchema is steward_overview's: an Overview.
func overviewOutputSchema() map[string]any {
	return map[string]any{"type": "object", "required": []string{"applications", "payer", "limits"},
		"properties": map[string]any{
			"applications": map[string]any{"type": "array", "description": "the applications you can use",
				"items": map[string]any{"type": "object", "required": []string{"application", "protocol", "availability"},
					"properties": map[string]any{
						"application":  schemaText("its name, as oracle_discover and oracle_call take it"),
						"protocol":     schemaText("the protocol it speaks"),
						"availability": schemaText("reachable or unreachable: can the host be reached for it now"),
					}}},
			"payer": map[string]any{"type": "object", "required": []string{"policy"},
				"description": "what the payer will still consent to pay for your calls",
				"properties": map[string]any{
					"policy":         map[string]any{"type": "boolean", "description": "false: no paid call is consented to"},
					"maxPerCall":     schemaCount("the most one call may be charged"),
					"perDay":         schemaCount("your budget a UTC day"),
					"remainingToday": schemaCount("what is left of it today"),
					"day":            schemaText("the UTC day counted; it refills at 00:00 UTC"),
				}},
			"limits": map[string]any{"type": "object", "required": []string{"reported"},
				"description": "what the operator's limits for you still allow today, as the host reports them",
				"properties": map[string]any{
					"reported":    map[string]any{"type": "boolean", "description": "false: the host reported no per-agent limits (note says why)"},
					"limited":     map[string]any{"type": "boolean", "description": "true: the operator set limits for you"},
					"operations":  map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": `the "APPLICATION/OPERATION" patterns you may call (absent: whatever the operator admits)`},
					"callsLeft":   schemaCount("admitted calls left today"),
					"creditsLeft": schemaCount("credits left today"),
					"refillsAt":   schemaText("when the day's counts refill (RFC 3339, UTC)"),
					"note":        schemaText("why the limits are as they are"),
				}},
		}}
}

func schemaText(description string) map[string]any {
	return map[string]any{"type": "string", "description": description}
}

func schemaCount(description string) map[string]any {
	return map[string]any{"type": "integer", "minimum": 0, "description": description}
}
