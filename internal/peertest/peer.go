package peertest

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stewardrt/steward/wire"
	"github.com/stewardrt/steward/wire/msg"
)

// Peer is the controller side of the tests: its keys, its reverse socket
// (answering reserve with a consent signed by its dispatch key, or by a
// forger's key) and its forward client.
type Peer struct {
	Name                  string
	Ctrl, Tool, Disp, Prv *wire.SigningKey
	Forger                *wire.SigningKey
	// Forge signs consents with Forger instead of Disp.
	Forge atomic.Bool
	// RefuseReserve answers every reserve with a refusal.
	RefuseReserve atomic.Bool
	// BeforeConsent runs before a consent is answered.
	BeforeConsent atomic.Pointer[func()]
	// Principal is the consent's principal when set; else uid:1000.
	Principal atomic.Pointer[string]
	// Reserves counts the reserves the host sent.
	Reserves atomic.Int64
	// Verdicts are the verdicts the host pushed (approvals).
	Verdicts chan msg.VerdictPush
}

// NewPeer makes a controller named name with fresh keys.
func NewPeer(t testing.TB, name string) *Peer {
	p := &Peer{Name: name, Verdicts: make(chan msg.VerdictPush, 64)}
	for _, k := range []**wire.SigningKey{&p.Ctrl, &p.Tool, &p.Disp, &p.Prv, &p.Forger} {
		var err error
		if *k, err = wire.GenerateSigningKey(); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// KeysFile is the peer's public keys as `controller add --keys` takes them.
func (p *Peer) KeysFile() []byte {
	b, err := wire.Marshal(msg.ControllerKeys{
		Controller: p.Ctrl.Public().MarshalCOSEKey(), Tool: p.Tool.Public().MarshalCOSEKey(),
		Dispatch: p.Disp.Public().MarshalCOSEKey(), Provider: p.Prv.Public().MarshalCOSEKey(),
	})
	if err != nil {
		panic(err)
	}
	return b
}

// ListenReverse serves the reverse socket at path for the host whose
// public key is host, until the test ends.
func (p *Peer) ListenReverse(t testing.TB, path string, host *wire.HybridPublicKey) {
	l, err := wire.Listen(wire.ListenConfig{
		Path: path, Mode: 0o600, Allow: func(wire.PeerCred) error { return nil },
		Refuse: wire.RefuseFrame(p.Disp),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	cfg := wire.ChannelConfig{
		Key: p.Disp, Role: msg.RoleControllerDispatch, PeerRole: msg.RoleHost, PeerKeys: wire.NewKeyring(host.Ed25519()),
		Path: path, Purpose: msg.PurposeCustody, SendLimit: wire.MaxReplyFrame, RecvLimit: wire.MaxRequestFrame,
	}
	go func() {
		for {
			pc, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer pc.Close()
				ch, err := wire.ServerHandshake(pc, cfg)
				if err != nil {
					return
				}
				wire.Serve(context.Background(), ch, wire.HandlerFunc(p.serveReverse))
			}()
		}
	}()
}

func (p *Peer) serveReverse(ctx context.Context, req *wire.Envelope) (string, any) {
	switch req.T {
	case msg.TypeReserve:
		p.Reserves.Add(1)
		var r msg.Reserve
		if err := req.Decode(&r); err != nil {
			return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest, Reason: err.Error()}
		}
		if p.RefuseReserve.Load() {
			return msg.TypeRefused, msg.Refusal{Code: msg.CodeNoConsent, Reason: "not journaled"}
		}
		key := p.Disp
		if p.Forge.Load() {
			key = p.Forger
		}
		principal := Agent
		if pr := p.Principal.Load(); pr != nil {
			principal = *pr
		}
		c, err := msg.SignConsent(key, msg.Consent{V: msg.CustodyV2, Attempt: r.Attempt, Controller: r.Controller,
			Principal: principal, Application: r.Application, Operation: r.Operation, RequestSHA256: r.RequestSHA256,
			GrantSHA256: msg.GrantHash(r.Grant), Charge: r.Charge, RefusalPrice: r.RefusalPrice, At: time.Now().UnixMilli()})
		if err != nil {
			return msg.TypeRefused, msg.Refusal{Code: msg.CodeInternal, Reason: err.Error()}
		}
		if f := p.BeforeConsent.Load(); f != nil {
			(*f)()
		}
		return msg.TypeConsent, msg.ConsentReply{Consent: c}
	case msg.TypeVerdict:
		var v msg.VerdictPush
		if err := req.Decode(&v); err != nil {
			return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest, Reason: err.Error()}
		}
		select {
		case p.Verdicts <- v:
		default:
		}
		return msg.TypeVerdictAck, struct{}{}
	}
	return msg.TypeRefused, msg.Refusal{Code: msg.CodeBadRequest, Reason: "unknown " + req.T}
}

// Dial opens a forward channel to the host's route socket fwd, closed when
// the test ends.
func (p *Peer) Dial(t testing.TB, fwd string, host *wire.HybridPublicKey) *wire.Client {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	uid := uint32(os.Geteuid())
	conn, err := wire.Dial(ctx, fwd, uid, uid)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := wire.ClientHandshake(conn, wire.ChannelConfig{
		Key: p.Tool, Role: msg.RoleControllerTool, PeerRole: msg.RoleHost, PeerKeys: wire.NewKeyring(host.Ed25519()),
		Path: fwd, Purpose: msg.PurposeDispatch, SendLimit: wire.MaxRequestFrame, RecvLimit: wire.MaxReplyFrame,
	})
	if err != nil {
		t.Fatal(err)
	}
	cl := wire.NewClient(ch)
	t.Cleanup(func() { cl.Close() })
	return cl
}
