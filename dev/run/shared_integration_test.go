//go:build integration

package main

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/fleetops/fleet/dev/stack"
)

// Local stacks that tests of this package share, each started on first use
// and stopped after the last test: a start of the emulator costs seconds of
// CPU, and the large fleet ten thousand writes. Only tests that change
// nothing in a stack share it; a test that writes (the change events, the
// log index, make seed-logs) starts a stack of its own.
var (
	fleet onceStack // localFleet slaves, for the fleet tests
	empty onceStack // no data, for the local server's tests
)

func TestMain(m *testing.M) {
	code := m.Run()
	fleet.close()
	empty.close()
	os.Exit(code)
}

// onceStack is a local stack started, and filled, once.
type onceStack struct {
	once  sync.Once
	local *stack.Local
	err   error
}

// get returns the stack, starting it on the first call and then calling
// fill (when not nil) with it.
func (s *onceStack) get(t *testing.T, fill func(*stack.Local) error) *stack.Local {
	t.Helper()
	s.once.Do(func() {
		s.local, s.err = stack.Up(context.Background(), "127.0.0.1:0")
		if s.err == nil && fill != nil {
			s.err = fill(s.local)
		}
	})
	if s.err != nil {
		t.Fatal(s.err)
	}
	return s.local
}

func (s *onceStack) close() {
	if s.local != nil {
		s.local.Close()
	}
}
