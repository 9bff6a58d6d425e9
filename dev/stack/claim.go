package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The emulator's claim. make run takes its port at once, but its emulator
// answers seconds later (moto's own start, then the tables, the buckets and
// the routes of the log buckets' events). A command started meanwhile would
// find nothing on the emulator's address, start an emulator of its own there
// and fail, or make make run fail, with "Address already in use". So the
// process that starts the emulator on a fixed address claims the address
// first: it write-locks the file bin/dev/emulator/<host>_<port>.json of the
// repository (an fcntl lock, which the kernel drops when the process ends,
// however it ends) and writes there its command, the address and its state:
// "starting", then "ready" once the others can use it. The lock names its
// process: another command asks the kernel who holds it, without taking it.
//
// A command that finds the claim held waits until its holder is ready, or
// has ended (then it claims the address itself), saying whom it waits for;
// one that finds it free claims it, then uses what listens there already or
// starts moto. A file whose lock nobody holds claims nothing.
const (
	ClaimStarting = "starting"
	ClaimReady    = "ready"
)

// ClaimWait bounds how long a command waits for another one to finish
// starting the emulator: make run's start is moto's (MotoStartTimeout at
// most) and the tables', slower on a busy machine, never minutes.
const ClaimWait = 5 * time.Minute

// BusyWait bounds how long a command waits for an answer from the emulator
// of a running make run (or of another command of the local stack): that one is
// busy, not stuck, when a large report keeps it for a minute.
const BusyWait = 5 * time.Minute

// Claimant is the process holding the claim of an emulator's address, as
// its file says.
type Claimant struct {
	PID     int    `json:"pid"`      // from the lock, not from the file
	Command string `json:"command"`  // "make run"
	Addr    string `json:"emulator"` // host:port
	State   string `json:"state"`    // ClaimStarting or ClaimReady
}

// String names the claimant: "make run (pid 1234)".
func (c *Claimant) String() string {
	return fmt.Sprintf("%s (pid %d)", c.name(), c.PID)
}

func (c *Claimant) name() string {
	if c.Command == "" {
		return "the command"
	}
	return c.Command
}

// owns says whose the emulator is: "make run's (pid 1234)".
func (c *Claimant) owns() string {
	return fmt.Sprintf("%s's (pid %d)", c.name(), c.PID)
}

// Claim is this process's claim of an emulator's address, held until
// Release.
type Claim struct {
	f   *os.File
	rec Claimant
}

// ClaimFile returns the file of the claim of the emulator at addr, in the
// repository at root.
func ClaimFile(root, addr string) string {
	name := strings.NewReplacer(":", "_", "[", "", "]", "", "/", "_").Replace(addr)
	return filepath.Join(root, "bin", "dev", "emulator", name+".json")
}

// claimEmulator claims the emulator at addr for command. When another
// process holds the claim, it returns that process instead.
func claimEmulator(root, addr, command string) (*Claim, *Claimant, error) {
	path := ClaimFile(root, addr)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, nil, fmt.Errorf("claim the emulator on %s: %w", addr, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("claim the emulator on %s: %w", addr, err)
	}
	locked, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("claim the emulator on %s: %w", addr, err)
	}
	if !locked {
		f.Close()
		holder, err := claimantOf(root, addr)
		if err != nil || holder != nil {
			return nil, holder, err
		}
		return claimEmulator(root, addr, command) // released in between
	}
	c := &Claim{f: f, rec: Claimant{PID: os.Getpid(), Command: command, Addr: addr, State: ClaimStarting}}
	if err := c.write(); err != nil {
		f.Close()
		return nil, nil, err
	}
	return c, nil, nil
}

func (c *Claim) write() error {
	body, err := json.Marshal(c.rec)
	if err != nil {
		return err
	}
	if err := c.f.Truncate(0); err != nil {
		return fmt.Errorf("claim the emulator on %s: %w", c.rec.Addr, err)
	}
	if _, err := c.f.WriteAt(append(body, '\n'), 0); err != nil {
		return fmt.Errorf("claim the emulator on %s: %w", c.rec.Addr, err)
	}
	return nil
}

// ready tells the commands waiting for the emulator that it is ready.
func (c *Claim) ready() error {
	if c == nil || c.rec.State == ClaimReady {
		return nil
	}
	c.rec.State = ClaimReady
	return c.write()
}

// release gives the claim up; the file stays, claiming nothing.
func (c *Claim) release() {
	if c != nil {
		_ = c.f.Close() // closing drops the lock
	}
}

// claimantOf returns the process holding the claim of the emulator at addr,
// nil when none does. Its file may be being written: an unreadable one is
// a claim still starting.
func claimantOf(root, addr string) (*Claimant, error) {
	f, err := os.Open(ClaimFile(root, addr))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pid, err := lockHolder(f)
	if err != nil || pid == 0 {
		return nil, err
	}
	c := &Claimant{}
	if body, err := os.ReadFile(f.Name()); err != nil || json.Unmarshal(body, c) != nil {
		c = &Claimant{Addr: addr, State: ClaimStarting}
	}
	c.PID = pid
	return c, nil
}

// waitClaim waits until holder, which holds the claim of the emulator at
// addr, is ready or has ended, at most ClaimWait, saying whom it waits for.
// It returns the claimant once ready, nil once the claim is free.
func waitClaim(ctx context.Context, root, addr string, holder *Claimant, say func(string, ...any)) (*Claimant, error) {
	began := time.Now()
	said, late := false, false
	for {
		switch {
		case holder == nil:
			return nil, nil
		case holder.State == ClaimReady:
			if said {
				say("local stack: %s has finished starting the emulator on %s (%.1fs)", holder, addr, time.Since(began).Seconds())
			}
			return holder, nil
		case !said:
			say("local stack: waiting for %s to finish starting the emulator on %s…", holder, addr)
			said = true
		case !late && time.Since(began) > 30*time.Second:
			say("local stack: still waiting for %s, which is starting the emulator on %s (a busy machine is slow); up to %v", holder, addr, ClaimWait)
			late = true
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %s to start the emulator on %s: %w", holder, addr, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Since(began) > ClaimWait {
			return nil, fmt.Errorf("%s has been starting the emulator on %s for %v: see its terminal, or stop it", holder, addr, ClaimWait)
		}
		var err error
		if holder, err = claimantOf(root, addr); err != nil {
			return nil, err
		}
	}
}
