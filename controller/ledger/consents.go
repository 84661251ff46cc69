package ledger

// ConsentKnown reports whether the journal or this process knows that
// open attempt id was consented to: this process signed a consent for it,
// its consented record is journaled (an attempt that awaited approval), or
// its uncertain result says a consent was given (Result.Consented). Of an
// attempt found at start without a result it knows nothing: whether a
// consent left before the crash is not on disk (see Spending).
//
// A requestId is consented again only once its attempt ended: with a
// host's receipt, or abandoned after the host said it never saw it. The
// controller refuses to abandon an attempt it knows it consented to
// (Controller.resolve), so that a host holding that consent cannot have
// the requestId consented a second time (DESIGN.md section 5, "One
// consent a requestId").
func (l *Ledger) ConsentKnown(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.open[id]
	return e != nil && (e.consented || e.recorded)
}
