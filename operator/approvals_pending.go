package operator

// doApprovals runs an approvals operation on the store. The asks store
// API (branch asks) is not merged yet: until it is, every approvals
// operation is refused here, and this file goes when it is.
func (s *Store) doApprovals(req AdminRequest) (AdminReply, error) {
	return AdminReply{}, refusedf("%s: the asks store is not built yet", req.Op)
}
