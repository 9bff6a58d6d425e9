// Package reconcile runs the template's ReconcileStateMachine on this
// machine (docs/behaviour.md "Reconciliation"): its definition, executed by
// dev/statemachine, listing the local bucket through the S3 API and
// invoking IndexerFunction's handler in this process, built by its
// composition root from the template's environment. make reconcile-logs,
// the bench and the tests run it.
package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/app/indexerapp"
	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/dev/statemachine"
	"github.com/fleetops/fleet/shared/logindex"
	"github.com/fleetops/fleet/shared/metrics"
)

// StateMachine and Function are the template's logical ids.
const (
	StateMachine = "ReconcileStateMachine"
	Function     = "IndexerFunction"
)

// Clients are the backends the reconciliation talks to; the bench passes
// clients that count their calls. Metrics, when set, gets the function's
// metrics (the drift).
type Clients struct {
	DynamoDB logindex.API
	S3       *s3.Client
	Metrics  *metrics.Emitter
}

// Machine returns ReconcileStateMachine over local, its steps and batches
// applied by IndexerFunction's handler with the template's environment and
// clients. Callers may set its Journal and ItemDone, and wrap its Invoke.
func Machine(ctx context.Context, local *stack.Local, c Clients) (*statemachine.Machine, error) {
	def, err := statemachine.Load(local.Template, StateMachine)
	if err != nil {
		return nil, err
	}
	env, err := local.Template.FunctionEnv(Function, stack.LocalName)
	if err != nil {
		return nil, err
	}
	handle, err := indexerapp.New(ctx, func(name string) string { return env[name] },
		indexerapp.Options{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), DynamoDB: c.DynamoDB, S3: c.S3, Metrics: c.Metrics})
	if err != nil {
		return nil, err
	}
	return &statemachine.Machine{Definition: def, List: statemachine.ListObjects(c.S3),
		Invoke: func(ctx context.Context, function string, payload json.RawMessage) (json.RawMessage, error) {
			if function != Function {
				return nil, fmt.Errorf("%s invokes %s, which runs only deployed", StateMachine, function)
			}
			res, err := handle(ctx, payload)
			if err != nil {
				return nil, err
			}
			return json.Marshal(res)
		}}, nil
}

// Input is the execution input that reconciles bucket under prefix; an
// empty bucket reconciles every bucket, each whole.
func Input(bucket, prefix string) json.RawMessage {
	in := map[string]string{}
	if bucket != "" {
		in["bucket"], in["prefix"] = bucket, prefix
	}
	raw, _ := json.Marshal(in)
	return raw
}

// Totals add up the batches of an execution so far: those that succeeded,
// in this run or an earlier one, and what they did.
type Totals struct {
	Batches int // that succeeded, in this run or an earlier one
	Earlier int // of those, the ones an earlier run had done (Journal)
	logindex.Counts
}

// String reads as "40 batches (16 done before): 12 added, 3 removed, 2
// updated, 19983 unchanged, 0 skipped".
func (t Totals) String() string {
	return fmt.Sprintf("%d batches (%d done before): %d added, %d removed, %d updated, %d unchanged, %d skipped",
		t.Batches, t.Earlier, t.Added, t.Removed, t.Updated, t.Unchanged, t.Skipped)
}

// Run executes m on input and returns the runs it finished (one per
// bucket: what Finish says, the drift of the whole run included) and the
// totals of its batches, also when it fails; it sets m.ItemDone to count
// them. progress, when set, is called after each batch with the totals so
// far, one call at a time.
func Run(ctx context.Context, m *statemachine.Machine, input json.RawMessage, progress func(Totals)) ([]logindex.Run, Totals, error) {
	var mu sync.Mutex
	var t Totals
	var bad error
	m.ItemDone = func(output any, earlier bool) {
		var res logindex.Result
		raw, _ := json.Marshal(output)
		err := json.Unmarshal(raw, &res)
		if err == nil && res.Outcome == "" {
			return // a bucket's whole run, of an execution over all of them
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil || res.Batch == nil {
			bad = fmt.Errorf("batch output %s has no counts", raw)
			return
		}
		t.Batches++
		if earlier {
			t.Earlier++
		}
		t.Added += res.Batch.Added
		t.Removed += res.Batch.Removed
		t.Updated += res.Batch.Updated
		t.Unchanged += res.Batch.Unchanged
		t.Skipped += res.Batch.Skipped
		if progress != nil {
			progress(t)
		}
	}
	out, err := m.Run(ctx, input)
	mu.Lock()
	defer mu.Unlock()
	if err != nil || bad != nil {
		return nil, t, errors.Join(err, bad)
	}
	var runs []logindex.Run
	if json.Unmarshal(out, &runs) != nil {
		var one logindex.Run
		if err := json.Unmarshal(out, &one); err != nil {
			return nil, t, fmt.Errorf("execution output %s: %w", out, err)
		}
		runs = []logindex.Run{one}
	}
	return runs, t, nil
}

// Buckets reconciles every log bucket of local whole, as the template's
// daily schedule does, and returns what each run says: make run does it
// once its events flow, so that its lookups read the index.
func Buckets(ctx context.Context, local *stack.Local) ([]logindex.Run, error) {
	m, err := Machine(ctx, local, Clients{DynamoDB: local.DynamoDB, S3: local.S3})
	if err != nil {
		return nil, err
	}
	runs, _, err := Run(ctx, m, Input("", ""), nil)
	return runs, err
}
