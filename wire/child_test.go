package wire

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// runChild is the body of a re-executed test binary, running as another
// account. It reports on stdout, one line, and returns the exit code.
func runChild(role string) int {
	var err error
	switch role {
	case "dial-handshake":
		err = childDialHandshake()
	case "listen":
		err = childListen()
	default:
		err = fmt.Errorf("unknown child role %q", role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

// childDialHandshake dials WIRE_SOCK (owned by root, listener root) and runs
// a client handshake pinning WIRE_SERVER_KEY, signing with the key file
// WIRE_CLIENT_KEY or a fresh key; it prints "refused: REASON", "ok" or
// "error: ERR".
func childDialHandshake() error {
	coseKey, err := hex.DecodeString(os.Getenv("WIRE_SERVER_KEY"))
	if err != nil {
		return err
	}
	serverKey, err := ParsePublicKey(coseKey)
	if err != nil {
		return err
	}
	var key *SigningKey
	if kf := os.Getenv("WIRE_CLIENT_KEY"); kf != "" {
		key, err = ReadSigningKey(kf) // a key file owned by this account
	} else {
		key, err = GenerateSigningKey()
	}
	if err != nil {
		return err
	}
	path := os.Getenv("WIRE_SOCK")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := Dial(ctx, path, 0, 0)
	if err != nil {
		fmt.Println("error:", err)
		return nil
	}
	ch, err := ClientHandshake(conn, ChannelConfig{Key: key, Role: "child", PeerKeys: NewKeyring(serverKey),
		Path: path, Purpose: "test", SendLimit: MaxRequestFrame, RecvLimit: MaxReplyFrame})
	switch {
	case errors.Is(err, ErrRefused):
		fmt.Println("refused:", err)
	case err != nil:
		fmt.Println("error:", err)
	default:
		fmt.Println("ok")
		ch.Close()
	}
	return nil
}

// childListen listens on WIRE_SOCK, admitting anyone, prints "ready", and
// serves until its standard input closes.
func childListen() error {
	key, err := GenerateSigningKey()
	if err != nil {
		return err
	}
	l, err := Listen(ListenConfig{Path: os.Getenv("WIRE_SOCK"), Mode: 0o666,
		Allow: func(PeerCred) error { return nil }, Refuse: RefuseFrame(key)})
	if err != nil {
		return err
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	fmt.Println("ready")
	io.Copy(io.Discard, bufio.NewReader(os.Stdin))
	return nil
}
