// Package views is what the host's commands show and submit: the views
// of its state (ControllerView, PurseView, GrantView, RouteView,
// AgentView, AttemptView, AskEvent) and the forms that change it
// (GrantSpec, AgentSpec, RouteRequest, RouteRegistration,
// ResolveRequest, Answer), each with its bounds and the checks a client
// can run before it asks, the host's caps on pending asks (AskBounds,
// serve's options) and the pages its lists of asks answer in (FitPage),
// and ErrRefused, the refusal the core, the admin language, the host and
// the command line word alike (exit code 2).
//
// It sits below the custody core (DESIGN.md section 11): the store
// returns and takes these types, the admin language carries them, and
// nothing here reaches the store or its state.
package views
