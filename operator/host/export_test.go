package host

// Host internals handed to the external tests (package host_test).

// AdminIdleTimeout is the admin channel's idle bound, which a test shortens.
var AdminIdleTimeout = &adminIdleTimeout

// AdminMaxConns is the admin socket's connection cap.
const AdminMaxConns = adminMaxConns

// ApprovalsOnly is the one line the approvals socket gives every
// operation but the approvals verbs.
const ApprovalsOnly = approvalsOnly

// ApproversGroup resolves the group of `serve --approvers-group`.
var ApproversGroup = approversGroup
