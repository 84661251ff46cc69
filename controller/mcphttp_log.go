package controller

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
)

// sdkLogger is the logger steward gives go-sdk (the MCP server's and the
// streamable HTTP handler's): log's handler, reached only by go-sdk's
// warnings and errors, with every session id in them shortened. go-sdk
// logs each session's id in full at INFO ("server session connected",
// "server session disconnected"); an HTTP session's id is, with the peer
// check, what names the session, and a log is read by more people than
// the agent that holds it. Its INFO and DEBUG lines are its own lifecycle
// chatter, which steward's log does not need: they are dropped whole.
func sdkLogger(log *slog.Logger) *slog.Logger {
	return slog.New(sdkHandler{next: log.Handler()})
}

// sdkSessionID matches a session id as go-sdk makes them (rand.Text: 26
// characters of the standard base32 alphabet).
var sdkSessionID = regexp.MustCompile(`\b[A-Z2-7]{26}\b`)

// redactSessionIDs shortens every session id in s (shortSessionID).
func redactSessionIDs(s string) string {
	return sdkSessionID.ReplaceAllStringFunc(s, shortSessionID)
}

// sdkHandler drops go-sdk's records below WARN and shortens session ids
// in the rest, in the message and in every attribute.
type sdkHandler struct{ next slog.Handler }

// Enabled passes WARN and above, as far as the next handler takes them.
func (h sdkHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.next.Enabled(ctx, l)
}

// Handle writes r with its session ids shortened.
func (h sdkHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return nil // a caller that did not ask Enabled
	}
	out := slog.NewRecord(r.Time, r.Level, redactSessionIDs(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

// WithAttrs shortens the session ids in as.
func (h sdkHandler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = redactAttr(a)
	}
	return sdkHandler{next: h.next.WithAttrs(red)}
}

// WithGroup names a group of the next handler.
func (h sdkHandler) WithGroup(name string) slog.Handler {
	return sdkHandler{next: h.next.WithGroup(name)}
}

// redactAttr is a with the session ids in its value shortened: a string
// as it is, a group member by member, any other value that is not a
// number, bool, time or duration as its text (an error's text can hold an
// id).
func redactAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, redactSessionIDs(v.String()))
	case slog.KindGroup:
		g := v.Group()
		red := make([]any, len(g))
		for i, m := range g {
			red[i] = redactAttr(m)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		return slog.String(a.Key, redactSessionIDs(fmt.Sprint(v.Any())))
	}
	return slog.Attr{Key: a.Key, Value: v}
}
