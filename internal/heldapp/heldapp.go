// Package heldapp is a test application that holds every request it reads:
// it answers none of them until the test ends. Tests of deadlines use it
// to make a delivery wait without sleeping: the test blocks on the channel
// Serve returns, which receives once per request read.
package heldapp

import (
	"bufio"
	"net"
	"net/http"
	"testing"
)

// Serve listens on the Unix socket sock and holds each request it reads
// until t ends, when the listener closes and every held connection is
// released. The channel receives once per request read (buffered for 8).
func Serve(t testing.TB, sock string) <-chan struct{} {
	t.Helper()
	got := make(chan struct{}, 8)
	release := make(chan struct{})
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(release); l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				got <- struct{}{}
				<-release
			}()
		}
	}()
	return got
}
