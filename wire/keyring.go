package wire

// Keyring is the set of public keys pinned for one socket and role. It is
// immutable after NewKeyring, so concurrent lookups need no lock.
type Keyring struct {
	keys map[KID]*PublicKey
}

// NewKeyring pins keys. Nil keys are skipped.
func NewKeyring(keys ...*PublicKey) *Keyring {
	r := &Keyring{keys: make(map[KID]*PublicKey, len(keys))}
	for _, k := range keys {
		if k != nil {
			r.keys[k.kid] = k
		}
	}
	return r
}

// Lookup returns the pinned key with this kid.
func (r *Keyring) Lookup(kid KID) (*PublicKey, bool) {
	if r == nil {
		return nil, false
	}
	k, ok := r.keys[kid]
	return k, ok
}

// Len returns the number of pinned keys.
func (r *Keyring) Len() int {
	if r == nil {
		return 0
	}
	return len(r.keys)
}
