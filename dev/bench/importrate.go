package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/fleetops/fleet/client"
	"github.com/fleetops/fleet/shared/slaves"
)

// importHistory is how many history entries each imported slave has: an
// old scheduler's machine that was frozen and activated again a few times.
const importHistory = 5

// importFigures measures the import route (POST /api/slaves/import)
// against the emulator: its rate, and its DynamoDB calls and items written
// per slave, for slaves not stored and again for the same slaves (which
// writes nothing), at two fleet sizes, carried to 100,000 machines; and
// what such a move costs in DynamoDB write units deployed.
func importFigures(ctx context.Context, e *env) ([]row, error) {
	f, err := newSlaveFunctions(ctx, e)
	if err != nil {
		return nil, err
	}
	run := time.Now().UnixMilli()
	var times, perSlave []point
	var calls, again string
	var written, writtenAgain, againPer float64
	for _, n := range []int{e.size(200, 100, 10), e.size(600, 300, 20)} {
		fleet := importedFleet(fmt.Sprintf("import-%d-%d", run, n), n, run)
		f.calls.take()
		f.calls.written.Store(0)
		began := time.Now()
		if err := importAll(ctx, f.routes, fleet, "imported"); err != nil {
			return nil, err
		}
		took := time.Since(began)
		byOp, said := f.calls.take()
		written = float64(f.calls.written.Swap(0)) / float64(n)
		times = append(times, point{float64(n), took.Seconds()})
		perSlave = append(perSlave, point{float64(n), float64(total(byOp)) / float64(n)})
		calls = said
		if err := importAll(ctx, f.routes, fleet, "unchanged"); err != nil {
			return nil, err
		}
		var againOps map[string]int
		againOps, again = f.calls.take()
		againPer = float64(total(againOps)) / float64(n)
		writtenAgain = float64(f.calls.written.Swap(0)) / float64(n)
		for _, s := range fleet {
			defer serve(context.WithoutCancel(ctx), f.routes, "DELETE", "/api/slaves/slave/"+s.Slave.ID, "")
		}
	}
	last := times[len(times)-1]
	// Deployed, a transaction's item costs two write units a KB; each
	// item here is under a KB.
	units := 2 * written * scaleMachines
	return []row{
		{figure: fmt.Sprintf("import of %s slaves (%d history entries each, one in five with an expiring change), batches of %d", thousands(last.size), importHistory, slaves.MaxImport),
			value: fmt.Sprintf("%.1f s, %.0f slaves a second (emulator)", last.value, last.size/last.value)},
		// A slave's transaction takes the next sequence of its feed shard,
		// so two of the 8 slaves an import writes at once may meet there:
		// the one that loses reads again and retries (3 calls more).
		{figure: "DynamoDB calls per slave imported (a read, a consistent read, a transaction; and the retries of those that met another in their feed shard), and per slave imported again",
			value:  fmt.Sprintf("%.2f (%s for %s), %s for the same again", perSlave[len(perSlave)-1].value, calls, thousands(last.size), again),
			target: "≤ 3.5 a new slave, 2 unchanged", met: verdict(perSlave[len(perSlave)-1].value <= 3.5 && againPer <= 2)},
		{figure: "items written per slave imported, and imported again",
			value: fmt.Sprintf("%.1f, %.1f", written, writtenAgain), target: "none again", met: verdict(writtenAgain == 0)},
		{figure: "import of 100,000 machines on the emulator",
			value: fit(times...).extrapolated(scaleMachines, seconds)},
		// Deployed, a slave's three calls take about 35 ms (single-digit
		// ms reads, a transaction of ten items about 20 ms); a request
		// writes 8 slaves at once and fleetctl import sends 4 at once.
		{figure: "import of 100,000 machines deployed, modelled: 35 ms a slave, 8 at once in a request, 4 requests at once (fleetctl import's default)",
			value: fmt.Sprintf("≈ %.0f s", scaleMachines*0.035/8/4)},
		{figure: "import of 100,000 machines deployed: DynamoDB write units and their cost",
			value: fmt.Sprintf("%.2f million units, $%.2f once (transactional: 2 units an item under 1 KB)", units/1e6, units*writeUnitPrice)},
	}, nil
}

// importedFleet is n slaves named prefix-<i>, each with importHistory
// entries ending FROZEN or ACTIVE, and an expiring change for one in five
// (they end FROZEN, to revert to ACTIVE).
func importedFleet(prefix string, n int, at int64) []client.ImportedSlave {
	fleet := make([]client.ImportedSlave, n)
	for i := range fleet {
		s := &fleet[i]
		id := fmt.Sprintf("%s-%d", prefix, i)
		s.Slave = client.Slave{ID: id, FirstSeenAt: at - 1e9, Host: fmt.Sprintf("node-%d.example.com", i), RackID: "us-east-1a",
			Attributes: map[string]string{"instance_type": "m5.4xlarge"}}
		for k := range importHistory {
			e := client.StateUpdate{ObjectID: id, State: client.Active, Timestamp: at - 1e9 + int64(k)*3_600_000, Message: "New machine reported"}
			if k%2 == 1 || (k == importHistory-1 && i%5 == 0) {
				e.State, e.User, e.Message = client.Frozen, "ops@example.com", "kernel upgrade"
			}
			s.History = append(s.History, e)
		}
		s.Slave.CurrentState = s.History[len(s.History)-1]
		if i%5 == 0 {
			s.Expiring = &client.Expiring{MachineID: id, User: "ops@example.com", StartMillis: at, ActionID: fmt.Sprintf("ticket-%d", i), RevertToState: client.Active,
				Request: client.ExpiringRequest{DurationMillis: 2 * time.Hour.Milliseconds(), RevertToState: client.Active}}
		}
	}
	return fleet
}

// importAll imports fleet in batches of slaves.MaxImport and checks that
// every slave's result is want.
func importAll(ctx context.Context, h http.Handler, fleet []client.ImportedSlave, want string) error {
	for from := 0; from < len(fleet); from += slaves.MaxImport {
		body, err := json.Marshal(client.ImportRequest{Slaves: fleet[from:min(len(fleet), from+slaves.MaxImport)]})
		if err != nil {
			return err
		}
		status, answer := serve(ctx, h, "POST", "/api/slaves/import", string(body))
		if status != http.StatusOK {
			return fmt.Errorf("import: got %d %.300s", status, answer)
		}
		var got client.ImportAnswer
		if err := json.Unmarshal([]byte(answer), &got); err != nil {
			return err
		}
		for _, r := range got.Results {
			if r.Result != want {
				return fmt.Errorf("import of %s: got %s (%s), want %s", r.ID, r.Result, r.Reason, want)
			}
		}
	}
	return nil
}
