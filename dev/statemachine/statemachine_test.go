package statemachine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetops/fleet/dev/lambdarun"
)

// definition is a plan, a map over the items of a manifest and a finish,
// as the template's ReportStateMachine has them.
func definition(concurrency, attempts int) map[string]any {
	var def map[string]any
	json.Unmarshal([]byte(fmt.Sprintf(`{"StartAt":"Plan","States":{
	  "Plan":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke","Parameters":{"FunctionName":"Fn","Payload":{"step":"plan","event.$":"$"}},"OutputPath":"$.Payload","Next":"InParts"},
	  "InParts":{"Type":"Choice","Choices":[{"Variable":"$.manifest","IsPresent":true,"Next":"Map"}],"Default":"Done"},
	  "Map":{"Type":"Map","ItemReader":{"Resource":"arn:aws:states:::s3:getObject","ReaderConfig":{"InputType":"JSON"},"Parameters":{"Bucket":"b","Key.$":"$.manifest"}},
	    "ItemSelector":{"step":"part","key.$":"$$.Map.Item.Value.key","report.$":"$.report"},"MaxConcurrency":%d,"ToleratedFailurePercentage":0,
	    "ItemProcessor":{"ProcessorConfig":{"Mode":"DISTRIBUTED"},"StartAt":"Part","States":{"Part":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke",
	      "Parameters":{"FunctionName":"Fn","Payload.$":"$"},"OutputPath":"$.Payload","Retry":[{"ErrorEquals":["States.ALL"],"IntervalSeconds":2,"MaxAttempts":%d,"BackoffRate":2}],"End":true}}},
	    "ResultPath":null,"Next":"Finish"},
	  "Finish":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke","Parameters":{"FunctionName":"Fn","Payload":{"step":"finish","report.$":"$.report"}},"OutputPath":"$.Payload","End":true},
	  "Done":{"Type":"Succeed"}}}`, concurrency, attempts)), &def)
	return def
}

func TestTheDriverRunsTheStatesAsDeclared(t *testing.T) {
	var mu sync.Mutex
	var steps []string
	running, most := 0, 0
	failures := map[string]int{"p3": 2} // p3 fails twice, then succeeds
	var waits []time.Duration
	m := &Machine{Definition: definition(2, 3),
		Read: func(_ context.Context, bucket, key string) ([]byte, error) {
			if bucket != "b" || key != "manifest.json" {
				return nil, fmt.Errorf("read %s/%s", bucket, key)
			}
			return []byte(`[{"key":"p1"},{"key":"p2"},{"key":"p3"},{"key":"p4"},{"key":"p5"}]`), nil
		},
		Sleep: func(d time.Duration) { mu.Lock(); waits = append(waits, d); mu.Unlock() },
		Invoke: func(_ context.Context, fn string, payload json.RawMessage) (json.RawMessage, error) {
			var in struct{ Step, Key, Report string }
			json.Unmarshal(payload, &in)
			mu.Lock()
			steps = append(steps, in.Step+" "+in.Key)
			running++
			most = max(most, running)
			fail := failures[in.Key] > 0
			failures[in.Key]--
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			mu.Lock()
			running--
			mu.Unlock()
			switch {
			case fail:
				return nil, errors.New("cut short")
			case in.Step == "plan":
				return json.RawMessage(`{"manifest":"manifest.json","report":"r1"}`), nil
			case in.Step == "part" && in.Report != "r1":
				return nil, fmt.Errorf("part of report %q, want r1", in.Report)
			}
			return json.RawMessage(`{"done":"` + in.Step + `"}`), nil
		}}
	out, err := m.Run(t.Context(), json.RawMessage(`{"detail-type":"Object Created"}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"done":"finish"}` {
		t.Errorf("got output %s, want the finish step's", out)
	}
	if steps[0] != "plan " || steps[len(steps)-1] != "finish " || len(steps) != 1+5+2+1 {
		t.Errorf("got steps %v, want plan, 5 parts and p3's 2 retries, then finish", steps)
	}
	if most > 2 {
		t.Errorf("got %d parts at once, want at most MaxConcurrency 2", most)
	}
	if len(waits) != 2 || waits[0] != 2*time.Second || waits[1] != 4*time.Second {
		t.Errorf("got waits %v, want 2 s then 4 s (IntervalSeconds 2, BackoffRate 2)", waits)
	}
}

func TestAPartThatKeepsFailingFailsTheExecution(t *testing.T) {
	m := &Machine{Definition: definition(8, 2), Sleep: func(time.Duration) {},
		Read: func(context.Context, string, string) ([]byte, error) {
			return []byte(`[{"key":"p1"},{"key":"p2"}]`), nil
		},
		Invoke: func(_ context.Context, _ string, payload json.RawMessage) (json.RawMessage, error) {
			switch {
			case strings.Contains(string(payload), `"plan"`):
				return json.RawMessage(`{"manifest":"m","report":"r"}`), nil
			case strings.Contains(string(payload), `"finish"`):
				t.Error("finish ran after a part failed")
			case strings.Contains(string(payload), `"p2"`):
				return nil, errors.New("broken part")
			}
			return json.RawMessage(`{}`), nil
		}}
	if _, err := m.Run(t.Context(), json.RawMessage(`{}`)); err == nil || !strings.Contains(err.Error(), "broken part") {
		t.Errorf("got %v, want the execution failed by the part", err)
	}
	if got := m.Invocations.Load(); got != 1+1+3 {
		t.Errorf("got %d invocations, want plan, p1, and p2 three times (MaxAttempts 2 retries)", got)
	}
}

func TestASmallReportEndsAfterItsPlan(t *testing.T) {
	m := &Machine{Definition: definition(8, 2),
		Invoke: func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"machines":3}`), nil
		}}
	out, err := m.Run(t.Context(), json.RawMessage(`{}`))
	if err != nil || string(out) != `{"machines":3}` || m.Invocations.Load() != 1 {
		t.Errorf("got %s, %v after %d invocations, want the plan's result after one", out, err, m.Invocations.Load())
	}
}

// refusedError stands for an error a function refuses for good, which a
// retrier named after it does not retry.
type refusedError struct{}

func (*refusedError) Error() string { return "refused for good" }

func TestARetrierNamingAnErrorDecidesBeforeStatesALL(t *testing.T) {
	def := map[string]any{"StartAt": "Plan", "States": map[string]any{"Plan": map[string]any{
		"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke", "End": true,
		"Parameters": map[string]any{"FunctionName": "F", "Payload": map[string]any{}},
		"Retry": []any{
			map[string]any{"ErrorEquals": []any{"refusedError"}, "MaxAttempts": 0.0},
			map[string]any{"ErrorEquals": []any{"States.ALL"}, "MaxAttempts": 3.0},
		}}}}
	for _, tc := range []struct {
		name     string
		err      error
		attempts int64
	}{
		{"the named error, in process", &refusedError{}, 1},
		{"the named error, as a function reports it", &lambdarun.FunctionError{Type: "refusedError", Message: "refused for good"}, 1},
		{"any other error", errors.New("flaky"), 4},
		{"a timeout", &lambdarun.FunctionError{Type: "Sandbox.Timedout"}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Machine{Definition: def, Sleep: func(time.Duration) {},
				Invoke: func(context.Context, string, json.RawMessage) (json.RawMessage, error) { return nil, tc.err }}
			if _, err := m.Run(t.Context(), json.RawMessage(`{}`)); !errors.Is(err, tc.err) {
				t.Errorf("got %v, want the execution failed with %v", err, tc.err)
			}
			if got := m.Invocations.Load(); got != tc.attempts {
				t.Errorf("got %d invocations, want %d", got, tc.attempts)
			}
		})
	}
}

func TestMaxConcurrencyCapsEveryMapAndAnInterruptionIsOneError(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var mu sync.Mutex
	running, most, parts := 0, 0, 0
	m := &Machine{Definition: definition(8, 3), MaxConcurrency: 2, Sleep: func(time.Duration) {},
		Read: func(context.Context, string, string) ([]byte, error) {
			return []byte(`[{"key":"p1"},{"key":"p2"},{"key":"p3"},{"key":"p4"},{"key":"p5"},{"key":"p6"}]`), nil
		},
		Invoke: func(ctx context.Context, _ string, payload json.RawMessage) (json.RawMessage, error) {
			if strings.Contains(string(payload), `"plan"`) {
				return json.RawMessage(`{"manifest":"manifest.json","report":"r1"}`), nil
			}
			mu.Lock()
			running++
			most = max(most, running)
			if parts++; parts == 4 {
				cancel() // Ctrl-C, with parts in flight
			}
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			mu.Lock()
			running--
			mu.Unlock()
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return json.RawMessage(`{}`), nil
		}}
	_, err := m.Run(ctx, json.RawMessage(`{}`))
	if most > 2 {
		t.Errorf("got %d parts at once, want at most 2", most)
	}
	if err == nil || strings.Count(err.Error(), "canceled") != 1 {
		t.Errorf("got %v, want the interruption said once", err)
	}
}
