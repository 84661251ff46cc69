package controller

import (
	"io"
	"net"
	"testing"

	"github.com/stewardrt/steward/appliance"
)

// startAppliance runs the reference application (package appliance) on
// sock with its journal in state, until the test ends.
func startAppliance(t testing.TB, sock, state string) {
	t.Helper()
	srv, err := appliance.Start(appliance.Config{Socket: sock, State: state})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
}

// relayAppliance serves sock with a relay to a real appliance (state in
// state, on its own socket) that reads each answer to its end whatever
// the host does meanwhile, and sends on the channel once per answer read.
// A host killed right after writing a request then still has it run and
// journaled by the appliance: the relay keeps the appliance's connection
// open, so the appliance never sees its client gone.
func relayAppliance(t testing.TB, sock, state string) <-chan struct{} {
	t.Helper()
	real := sock + "-app"
	startAppliance(t, real, state)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	answered := make(chan struct{}, 64)
	go func() {
		for {
			host, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer host.Close()
				app, err := net.Dial("unix", real)
				if err != nil {
					return
				}
				defer app.Close()
				go io.Copy(app, host)
				answer, _ := io.ReadAll(app) // the appliance closes after answering (Connection: close)
				host.Write(answer)
				answered <- struct{}{}
			}()
		}
	}()
	return answered
}
