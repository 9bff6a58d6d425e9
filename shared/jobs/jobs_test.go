package jobs_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/fleetops/fleet/shared/callcount"
	"github.com/fleetops/fleet/shared/change"
	"github.com/fleetops/fleet/shared/jobs"
	"github.com/fleetops/fleet/shared/lambdalog"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/memstore"
	"github.com/fleetops/fleet/shared/metrics"
)

var runAt = time.Date(2026, 11, 21, 5, 14, 0, 0, time.UTC)

// runStore is memstore with what a run against DynamoDB also meets: every
// Due and Apply is counted as one SDK call, the first Apply as a throttled
// one; the slave "failed" cannot be reached, and the record of "superseded"
// is deleted by a user between Due and Apply.
type runStore struct {
	*memstore.Store
	mu      sync.Mutex
	applies int
}

// runLimits leaves room for one decommissioning slave, which "busy" takes.
var runLimits = machine.Limits{MaxDecommissioning: 1}

// newRunStore holds a record falling due at each of due, reverting a FROZEN
// slave to ACTIVE, except: "dropped" has no slave, and "deferred" reverts to
// STARTING_DECOMMISSION while "busy" fills the decommission limit.
func newRunStore(due ...machine.Due) *runStore {
	s := &runStore{Store: memstore.New(0)}
	busy := machine.Update{SlaveID: "busy", State: machine.StartingDecommission, Timestamp: minutesAgo(120)}
	s.Put(machine.Slave{ID: "busy", Current: busy})
	for _, d := range due {
		start := d.At - 60_000
		revert := machine.Active
		if d.SlaveID == "deferred" {
			revert = machine.StartingDecommission
		}
		if d.SlaveID != "dropped" {
			s.Put(machine.Slave{ID: d.SlaveID, Current: machine.Update{SlaveID: d.SlaveID, State: machine.Frozen, Timestamp: start}})
		}
		s.PutExpiring(machine.Expiring{MachineID: d.SlaveID, StartMillis: start, ActionID: "action-" + d.SlaveID, RevertTo: revert,
			Request: machine.ChangeRequest{DurationMillis: new(int64(60_000)), RevertToState: new(revert)}})
	}
	return s
}

func (s *runStore) Due(ctx context.Context, now int64) ([]machine.Due, error) {
	callcount.From(ctx).Add(false)
	return s.Store.Due(ctx, now)
}

func (s *runStore) Apply(ctx context.Context, id string, decide machine.Decide) error {
	s.mu.Lock()
	s.applies++
	callcount.From(ctx).Add(s.applies == 1)
	s.mu.Unlock()
	switch id {
	case "failed":
		return errors.New("dynamodb: connection reset")
	case "superseded":
		if err := s.DeleteExpiring(ctx, id); err != nil {
			return err
		}
	}
	return s.Store.Apply(ctx, id, decide)
}

func minutesAgo(m int) int64 { return runAt.Add(-time.Duration(m) * time.Minute).UnixMilli() }

func TestARunReportsItsOutcomesAndLagOnceInTheLogAndTheMetrics(t *testing.T) {
	tests := []struct {
		name    string
		due     []machine.Due
		want    jobs.Result
		wantLag float64
	}{
		{name: "nothing due is no lag", want: jobs.Result{Job: jobs.Expiry}},
		{name: "the lag is the age of the oldest due record",
			due:  []machine.Due{{SlaveID: "applied-1", At: minutesAgo(7)}, {SlaveID: "dropped", At: minutesAgo(1)}, {SlaveID: "applied-2", At: minutesAgo(0) - 1}},
			want: jobs.Result{Job: jobs.Expiry, Due: 3, Applied: 2, Dropped: 1, LagMillis: 7 * 60_000}},
		{name: "a deferred record does not count as lag, a failed one does",
			due:  []machine.Due{{SlaveID: "deferred", At: minutesAgo(60)}, {SlaveID: "failed", At: minutesAgo(2)}, {SlaveID: "superseded", At: minutesAgo(1)}},
			want: jobs.Result{Job: jobs.Expiry, Due: 3, Deferred: 1, Failed: 1, Superseded: 1, LagMillis: 2 * 60_000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer // stdout: the log lines and the metrics documents, as in Lambda
			m, err := metrics.New(&out, "Fleet", "fleet-ExpiryFunction-1")
			if err != nil {
				t.Fatal(err)
			}
			r := jobs.New(newRunStore(tt.due...), runLimits, time.Hour, lambdalog.New(&out, func(string) string { return "" }), m)
			r.Now = func() time.Time { return runAt }
			ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-expiry-1"})

			got, err := r.Handle(ctx, json.RawMessage(`{"job":"expiry"}`))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}

			var logLine, doc map[string]any
			var coldStarts int
			sc := bufio.NewScanner(&out)
			for sc.Scan() {
				var l map[string]any
				if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
					t.Fatalf("line %q is not JSON: %v", sc.Text(), err)
				}
				switch {
				case l["message"] == "scheduled job done":
					logLine = l
				case l[metrics.ExpiryApplied] != nil:
					doc = l
				case l[metrics.ColdStarts] != nil:
					coldStarts++
				}
			}
			if logLine == nil || doc == nil || coldStarts != 1 {
				t.Fatalf("got log line %v, metrics %v, %d cold starts; want one of each: %s", logLine, doc, coldStarts, out.String())
			}
			calls := float64(1 + len(tt.due))
			for k, v := range map[string]any{"requestId": "req-expiry-1", "applied": float64(tt.want.Applied), "lag_ms": float64(tt.want.LagMillis),
				"backend_calls": calls} {
				if logLine[k] != v {
					t.Errorf("got log %s = %v, want %v", k, logLine[k], v)
				}
			}
			for name, v := range map[string]int{metrics.ExpiryApplied: tt.want.Applied, metrics.ExpirySkipped: tt.want.Skipped,
				metrics.ExpiryDropped: tt.want.Dropped, metrics.ExpirySuperseded: tt.want.Superseded, metrics.ExpiryDeferred: tt.want.Deferred,
				metrics.ExpiryFailed: tt.want.Failed, metrics.ExpiryRemaining: tt.want.Remaining} {
				if doc[name] != float64(v) {
					t.Errorf("got %s = %v, want %d", name, doc[name], v)
				}
			}
			if doc[metrics.ExpiryLag] != float64(tt.want.LagMillis) {
				t.Errorf("got %s = %v, want %d", metrics.ExpiryLag, doc[metrics.ExpiryLag], tt.want.LagMillis)
			}
			wantThrottles := any(nil)
			if len(tt.due) > 0 {
				wantThrottles = 1.0
			}
			if doc[metrics.BackendThrottles] != wantThrottles {
				t.Errorf("got %s = %v, want %v", metrics.BackendThrottles, doc[metrics.BackendThrottles], wantThrottles)
			}
			md := doc["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
			var units = map[string]string{}
			for _, d := range md["Metrics"].([]any) {
				def := d.(map[string]any)
				units[def["Name"].(string)] = def["Unit"].(string)
			}
			if units[metrics.ExpiryLag] != "Milliseconds" || units[metrics.ExpiryFailed] != "Count" {
				t.Errorf("got units %v, want ExpiryLag in Milliseconds and counts in Count", units)
			}
		})
	}
}

func TestAnEventOfAnotherKindRunsNoJob(t *testing.T) {
	tests := []struct {
		name, event, kind string
	}{
		{"an API Gateway REST request", `{"resource":"/api/slaves","path":"/api/slaves","httpMethod":"GET","requestContext":{"stage":"prod"}}`, "an API Gateway request"},
		{"an HTTP API request", `{"version":"2.0","routeKey":"GET /api/slaves","rawPath":"/api/slaves","requestContext":{"http":{"method":"GET"}}}`, "an API Gateway request"},
		{"a machine report event", `{"version":"0","detail-type":"Machine Report","source":"fleet.scheduler","detail":{"machines":[]}}`, `an EventBridge "Machine Report" event`},
		{"a machine report's detail", `{"complete":false,"machines":[]}`, "a machine report"},
		{"an SQS batch", `{"Records":[{"messageId":"1","body":"{}"}]}`, "an event of records"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := jobs.New(newRunStore(), runLimits, time.Hour, lambdalog.New(io.Discard, func(string) string { return "" }), nil)
			_, err := r.Handle(t.Context(), json.RawMessage(tt.event))
			if err == nil || !strings.Contains(err.Error(), tt.kind) || !strings.Contains(err.Error(), "is not a scheduled event") {
				t.Errorf("got %v, want an error naming %s", err, tt.kind)
			}
		})
	}
}

func TestTheEventNamesItsJobByTheExactFieldName(t *testing.T) {
	tests := []struct {
		name, event string
		want        string
	}{
		{"job names the job", `{"job":"retention"}`, jobs.Retention},
		{"a job field in another case is unknown, so the expiry job runs", `{"JOB":"retention"}`, jobs.Expiry},
		{"a job field in another case cannot override job", `{"job":"expiry","Job":"retention"}`, jobs.Expiry},
		{"a scheduled event runs the expiry job", `{"version":"0","detail-type":"Scheduled Event","source":"aws.events","detail":{}}`, jobs.Expiry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := jobs.New(newRunStore(), runLimits, time.Hour, lambdalog.New(io.Discard, func(string) string { return "" }), nil)
			r.Now = func() time.Time { return runAt }
			got, err := r.Handle(t.Context(), json.RawMessage(tt.event))
			if err != nil {
				t.Fatal(err)
			}
			if got.Job != tt.want {
				t.Errorf("got job %q, want %q", got.Job, tt.want)
			}
		})
	}
}

// laneStore is memstore that holds each Apply a moment and records how
// many run at once, in all and per shard of the change feed.
type laneStore struct {
	*memstore.Store
	mu                  sync.Mutex
	running             map[int]int
	mostAll, mostShared int
	all                 int
}

func (s *laneStore) Apply(ctx context.Context, id string, decide machine.Decide) error {
	shard := change.ShardOf(id)
	s.mu.Lock()
	s.running[shard]++
	s.all++
	s.mostAll = max(s.mostAll, s.all)
	s.mostShared = max(s.mostShared, s.running[shard])
	s.mu.Unlock()
	time.Sleep(2 * time.Millisecond)
	s.mu.Lock()
	s.running[shard]--
	s.all--
	s.mu.Unlock()
	return s.Store.Apply(ctx, id, decide)
}

func TestARunNeverAppliesTwoRecordsOfOneFeedShardAtOnce(t *testing.T) {
	// Each change moves its feed shard's head: two of one shard at once
	// race for it, and a run of thousands lost records to that race.
	s := &laneStore{Store: newRunStore().Store, running: map[int]int{}}
	for i := range 200 {
		id := fmt.Sprintf("lane-%d", i)
		s.Put(machine.Slave{ID: id, Current: machine.Update{SlaveID: id, State: machine.Frozen, Timestamp: minutesAgo(10)}})
		s.PutExpiring(machine.Expiring{MachineID: id, StartMillis: minutesAgo(10), ActionID: "action-" + id, RevertTo: machine.Active,
			Request: machine.ChangeRequest{DurationMillis: new(int64(60_000)), RevertToState: new(machine.Active)}})
	}
	r := jobs.New(s, runLimits, 0, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	r.Now = func() time.Time { return runAt }
	res, err := r.Expire(context.Background())
	if err != nil || res.Applied != 200 {
		t.Fatalf("got %+v, %v, want 200 applied", res, err)
	}
	if s.mostShared != 1 {
		t.Errorf("got %d records of one shard applied at once, want 1", s.mostShared)
	}
	if s.mostAll < 2 {
		t.Errorf("got at most %d records applied at once, want the shards in parallel", s.mostAll)
	}
}
