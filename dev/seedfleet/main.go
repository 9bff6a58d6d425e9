// Command seedfleet writes a fleet of slaves into the local stack's slaves
// table, as the store writes them (dev/fleettable): N slaves (-n, 20,000
// unless told) with ids fleet-000000 onwards, -frozen of them FROZEN and the
// rest ACTIVE. It needs the emulator `make run` started (it refuses to seed
// one it would stop again on exit), and then times GET /api/slaves and GET
// /api/slaves?state=ACTIVE through make run's server (-api, empty to skip;
// make run's PORT unless told).
// Running it again writes the same slaves again.
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/fleetops/fleet/dev/fleettable"
	"github.com/fleetops/fleet/dev/stack"
)

func main() {
	n := flag.Int("n", 20_000, "how many slaves")
	frozen := flag.Int("frozen", 100, "how many of them FROZEN")
	api := flag.String("api", "http://127.0.0.1:"+cmp.Or(os.Getenv("PORT"), "3000"), "make run's server (its PORT), whose list and state query are timed after seeding; empty: none")
	flag.Parse()
	if err := run(context.Background(), *n, *frozen, *api); err != nil {
		fmt.Fprintln(os.Stderr, "seedfleet:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, n, frozen int, api string) error {
	if n < 1 || frozen < 0 || frozen > n {
		return fmt.Errorf("-n must be at least 1 and -frozen between 0 and -n, got %d and %d", n, frozen)
	}
	local, err := stack.UpWith(ctx, stack.Addr(), stack.Options{Command: "make seed-fleet", Progress: os.Stderr})
	if err != nil {
		return err
	}
	defer local.Close()
	if local.Moto.Started {
		return fmt.Errorf("nothing answers on %s: start the local stack first (make run)", local.Moto.Endpoint)
	}
	began := time.Now()
	if err := fleettable.Put(ctx, local.DynamoDB, stack.Tables.Slaves, fleettable.Items(n, frozen)); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "seedfleet: %d slaves (%d FROZEN) written to %s in %.1f s\n", n, frozen, stack.Tables.Slaves, time.Since(began).Seconds())
	if api == "" {
		return nil
	}
	for _, path := range []string{"/api/slaves", "/api/slaves?state=ACTIVE"} {
		if err := timeGet(ctx, api+path); err != nil {
			return err
		}
	}
	return nil
}

// timeGet prints the status, size and time of one GET of url, as the
// console or fleetctl would ask it (gzip accepted).
func timeGet(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	began := time.Now()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s (is make run serving it?): %w", url, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	fmt.Printf("GET %s: %d, %d bytes in %.2f s\n", url, res.StatusCode, len(body), time.Since(began).Seconds())
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s answered %d: %.200s", url, res.StatusCode, body)
	}
	return nil
}
