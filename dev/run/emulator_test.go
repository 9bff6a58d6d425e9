package main

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestMakeRunSaysWhoseTheEmulatorIsAndWhenItsDataGoes(t *testing.T) {
	own := emulatorNotice(true, "127.0.0.1:4566", 3000)
	for _, want := range []string{"in memory only", "gone when make run stops", "keeps nothing on disk"} {
		if !strings.Contains(own, want) {
			t.Errorf("an emulator of its own: got %q, want it to say %q", own, want)
		}
	}
	shared := emulatorNotice(false, "127.0.0.1:4566", 3001)
	for _, want := range []string{"sharing the emulator already running on 127.0.0.1:4566", "answers 503", "EMULATOR_ADDR=127.0.0.1:4567 PORT=3001 make run"} {
		if !strings.Contains(shared, want) {
			t.Errorf("a shared emulator: got %q, want it to say %q", shared, want)
		}
	}
}

// syncBuffer is a strings.Builder for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A make run sharing another's emulator says when that one stops, instead
// of answering 503s with nothing in either terminal, and gives the tables
// back to the next emulator that runs there.
func TestMakeRunSaysWhenTheSharedEmulatorStopsAndComesBack(t *testing.T) {
	emulator, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := emulator.Addr().String()
	var out syncBuffer
	var recreated atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go watchEmulator(ctx, addr, 20*time.Millisecond, &out, func(context.Context) error {
		recreated.Add(1)
		return nil
	})
	waitFor := func(want string) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for !strings.Contains(out.String(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("got %q, want %q", out.String(), want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	time.Sleep(100 * time.Millisecond)
	if out.String() != "" {
		t.Fatalf("got %q while the emulator runs, want nothing", out.String())
	}
	emulator.Close()
	waitFor("make run: the emulator on " + addr + " stopped")
	if !strings.Contains(out.String(), "every API call answers 503") {
		t.Errorf("got %q, want it to say what the API answers meanwhile", out.String())
	}
	again, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	waitFor("make run: an emulator runs on " + addr + " again")
	if recreated.Load() != 1 {
		t.Errorf("created the tables %d times, want once", recreated.Load())
	}
}
