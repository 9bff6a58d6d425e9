package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/fleetops/fleet/dev/stack"
)

// emulatorNotice is what make run says of the emulator once it is up: whose
// it is, and when its data goes. moto holds everything in memory and has no
// way to keep it on disk, so a make run that started it loses the fleet
// when it stops. A second make run (PORT=3001) shares the first one's
// emulator, and with it the fleet, for as long as the first one runs.
func emulatorNotice(started bool, addr string, port int) string {
	if started {
		return fmt.Sprintf("make run: moto on %s holds the tables and log buckets in memory only: they are gone when make run stops (moto keeps nothing on disk); make invoke and make seed-logs fill them again", addr)
	}
	holder, own := "", "another address"
	if host, p, err := net.SplitHostPort(addr); err == nil {
		if n, err := strconv.Atoi(p); err == nil {
			if h := portHolder(n); h != "" {
				holder = " (" + h + ")"
			}
			own = net.JoinHostPort(host, strconv.Itoa(n+1))
		}
	}
	return fmt.Sprintf("make run: sharing the emulator already running on %s%s: the data is its, and when it stops (the make run that started it ends, say) this server answers 503 until one runs there again; for an emulator of this server's own: EMULATOR_ADDR=%s PORT=%d make run", addr, holder, own, port)
}

// watchEmulator watches the emulator at addr, which another process
// started, every interval until ctx ends: it says on out when it stops
// listening, and when one listens there again, which then gets the tables
// and log buckets (recreate), as a new emulator starts empty.
func watchEmulator(ctx context.Context, addr string, every time.Duration, out io.Writer, recreate func(context.Context) error) {
	up, failed := true, false
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := stack.Listening(addr)
		switch {
		case up && !now:
			fmt.Fprintf(out, "make run: the emulator on %s stopped (the process that started it ended): every API call answers 503 until one runs there again; restart make run to run one of its own\n", addr)
			up = false
		case !up && now:
			if err := recreate(ctx); err != nil {
				// Perhaps still starting: tried again at the next tick.
				if !failed {
					fmt.Fprintf(out, "make run: an emulator listens on %s again, but the tables cannot be created there yet: %v\n", addr, err)
				}
				failed = true
				continue
			}
			fmt.Fprintf(out, "make run: an emulator runs on %s again; it started empty, and has the tables and log buckets again\n", addr)
			up, failed = true, false
		}
	}
}
