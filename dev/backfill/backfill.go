// Package backfill runs the template's BackfillStateMachine on this machine
// (docs/behaviour.md "Backfill"): its definition, executed by
// dev/statemachine, listing the local bucket through the S3 API and
// invoking IndexerFunction's handler in this process, built by its
// composition root from the template's environment. make backfill-logs,
// the bench and the tests run it.
package backfill

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
)

// StateMachine and Function are the template's logical ids.
const (
	StateMachine = "BackfillStateMachine"
	Function     = "IndexerFunction"
)

// Clients are the backends the backfill talks to; the bench passes clients
// that count their calls.
type Clients struct {
	DynamoDB logindex.API
	S3       *s3.Client
}

// Machine returns BackfillStateMachine over local, its batches applied by
// IndexerFunction's handler with the template's environment and clients.
// Callers may set its Journal and ItemDone, and wrap its Invoke.
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
		indexerapp.Options{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), DynamoDB: c.DynamoDB, S3: c.S3})
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

// Input is the execution input that backfills bucket under prefix.
func Input(bucket, prefix string) json.RawMessage {
	raw, _ := json.Marshal(map[string]string{"bucket": bucket, "prefix": prefix})
	return raw
}

// Totals add up the batches of an execution.
type Totals struct {
	Batches int // that succeeded, in this run or an earlier one
	Earlier int // of those, the ones an earlier run had done (Journal)
	logindex.Counts
}

// String reads as "40 batches (16 done before): 20000 indexed, 0 skipped,
// 0 gone".
func (t Totals) String() string {
	return fmt.Sprintf("%d batches (%d done before): %d indexed, %d skipped, %d gone", t.Batches, t.Earlier, t.Indexed, t.Skipped, t.Gone)
}

// Run executes m on input and returns the totals of its batches, also when
// it fails; it sets m.ItemDone to count them. progress, when set, is called
// after each batch with the totals so far, one call at a time.
func Run(ctx context.Context, m *statemachine.Machine, input json.RawMessage, progress func(Totals)) (Totals, error) {
	var mu sync.Mutex
	var t Totals
	var bad error
	m.ItemDone = func(output any, earlier bool) {
		mu.Lock()
		defer mu.Unlock()
		var res logindex.Result
		raw, _ := json.Marshal(output)
		if err := json.Unmarshal(raw, &res); err != nil || res.Backfill == nil {
			bad = fmt.Errorf("batch output %s has no counts", raw)
			return
		}
		t.Batches++
		if earlier {
			t.Earlier++
		}
		t.Indexed += res.Backfill.Indexed
		t.Skipped += res.Backfill.Skipped
		t.Gone += res.Backfill.Gone
		if progress != nil {
			progress(t)
		}
	}
	_, err := m.Run(ctx, input)
	mu.Lock()
	defer mu.Unlock()
	return t, errors.Join(err, bad)
}
