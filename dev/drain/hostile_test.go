package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/fleetops/fleet/client"
)

// What the service answers is untrusted: a state with terminal controls in
// it is printed escaped, never as it came, in every line make drain writes
// and in its errors. (The client escapes the messages of the service's
// errors itself.)
func TestWhatTheServiceSaysIsPrintedEscaped(t *testing.T) {
	const hostile = "FROZEN\x1b]0;owned\x07\x1b[2J\n\u202e"
	var out bytes.Buffer
	d := &drainer{id: "S1", shown: "S1", stdout: &out, stderr: &out}

	// A machine in a state that is not a drain's: the waiting line and the
	// timeout's error both name the state.
	m := &client.Slave{ID: "S1"}
	m.CurrentState.State = client.State(hostile)
	_, waitErr := d.untilDraining(context.Background(), m, 0)
	if waitErr == nil {
		t.Fatal("got no error from a wait of 0 for a machine that is not draining")
	}
	for name, text := range map[string]string{"printed": out.String(), "wait error": waitErr.Error()} {
		if strings.ContainsAny(strings.TrimSuffix(text, "\n"), "\x1b\x07\n\u202e") {
			t.Errorf("%s: got %q, want the service's controls escaped", name, text)
		}
	}
	if !strings.Contains(out.String(), `FROZEN\x1b]0;owned`) {
		t.Errorf("printed %q, want the state shown escaped", out.String())
	}
}
