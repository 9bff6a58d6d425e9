// Package statemachine runs a Step Functions state machine of template.yaml
// on this machine, for make report, make run and the tests: there is no
// Step Functions emulator that can call a Lambda function without Docker.
// It executes the definition as the template declares it, the same states
// in the same order, calling the same handlers in process with the
// payloads Step Functions would send, honouring each Map's MaxConcurrency
// and ToleratedFailurePercentage and each Task's Retry.
//
// It knows what the template's state machines use, and refuses anything
// else rather than guess: Task states on arn:aws:states:::lambda:invoke,
// and on arn:aws:states:::states:startExecution.sync:2 of the machine itself
// ($$.StateMachine.Id), run in process; Choice rules with Variable and IsPresent, NumericGreaterThan or And, Pass
// with Parameters, Map states over a JSON array read from S3 (ItemReader
// with arn:aws:states:::s3:getObject) or over the objects of a bucket
// (arn:aws:states:::s3:listObjectsV2, Bucket and Prefix), with an
// ItemSelector and an ItemBatcher (MaxItemsPerBatch, MaxInputBytesPerBatch,
// BatchInput), or over an array of the input (ItemsPath); Succeed and Fail;
// Parameters, OutputPath and ResultPath (a path or null); paths of the form
// $, $.a.b, $$.Map.Item.Value.a and $$.StateMachine.Id. A
// Journal keeps an execution's finished Map items across runs, as redrive
// does.
package statemachine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/fleetops/fleet/dev/stack"
)

// Invoke calls the function named by its logical id with payload, as
// lambda:invoke does, and returns its response.
type Invoke func(ctx context.Context, function string, payload json.RawMessage) (json.RawMessage, error)

// Read returns the object bucket/key, as an ItemReader reads it.
type Read func(ctx context.Context, bucket, key string) ([]byte, error)

// List returns a page of the objects of bucket under prefix from the
// continuation token (empty for the first page), as the ItemReader
// arn:aws:states:::s3:listObjectsV2 reads them, each in Step Functions'
// shape (ListObjects makes them), and the token of the next page, empty
// after the last.
type List func(ctx context.Context, bucket, prefix, token string) (items []any, next string, err error)

// Machine is a state machine's definition and what its states call.
type Machine struct {
	Definition map[string]any
	Invoke     Invoke
	Read       Read
	List       List
	// Journal, when set, holds the Map items that succeeded and their
	// outputs, across runs: an item it holds is not run again. Run again
	// after an interruption or a failure, an execution reruns only the
	// items that did not succeed, as Step Functions' redrive does.
	Journal *Journal
	// ItemDone, when set, is told of each Map item that succeeded, with its
	// output, and whether that was in an earlier run (Journal).
	ItemDone func(output any, earlier bool)
	// MaxConcurrency, when above 0, caps every Map's MaxConcurrency: a
	// local emulator answers one request at a time, and more items at once
	// than it can serve only make each of them wait longer, up to its
	// timeout (make report runs parts one at a time).
	MaxConcurrency int
	// Sleep waits before a retry; time.Sleep unless a test sets another.
	Sleep func(time.Duration)
	// Invocations counts the Lambda invocations made, retries included.
	Invocations atomic.Int64
	// States counts the states entered, Map items' included: what Step
	// Functions bills a Standard workflow for (state transitions).
	States atomic.Int64
}

// Load returns the definition of the AWS::Serverless::StateMachine id of
// tpl, its DefinitionSubstitutions applied: a !GetAtt <Function>.Arn
// becomes the function's logical id, which Invoke receives.
func Load(tpl *stack.Template, id string) (map[string]any, error) {
	r, ok := tpl.Resources[id]
	if !ok || r.Type != "AWS::Serverless::StateMachine" {
		return nil, fmt.Errorf("%s is not a state machine of the template", id)
	}
	subs := map[string]string{}
	for k, v := range asMap(r.Properties["DefinitionSubstitutions"]) {
		att, _ := asMap(v)["Fn::GetAtt"].([]any)
		if len(att) != 2 || att[1] != "Arn" {
			return nil, fmt.Errorf("%s: substitution %s is not a !GetAtt of an Arn", id, k)
		}
		subs["${"+k+"}"] = fmt.Sprint(att[0])
	}
	def, ok := substitute(r.Properties["Definition"], subs).(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s has no inline Definition", id)
	}
	return def, nil
}

func substitute(v any, subs map[string]string) any {
	switch v := v.(type) {
	case string:
		for k, s := range subs {
			v = strings.ReplaceAll(v, k, s)
		}
		return v
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = substitute(x, subs)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = substitute(x, subs)
		}
		return out
	}
	return v
}

// Run executes the state machine on input and returns its output.
func (m *Machine) Run(ctx context.Context, input json.RawMessage) (json.RawMessage, error) {
	var in any
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, fmt.Errorf("execution input: %w", err)
	}
	out, err := m.run(ctx, m.Definition, in, nil)
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

// run executes the states of def (the machine, or a Map's ItemProcessor)
// from its StartAt; item is the Map item of an item processor's context.
func (m *Machine) run(ctx context.Context, def map[string]any, input any, item map[string]any) (any, error) {
	states := asMap(def["States"])
	name, _ := def["StartAt"].(string)
	for {
		state := asMap(states[name])
		if state == nil {
			return nil, fmt.Errorf("no state %q", name)
		}
		m.States.Add(1)
		var out any
		var err error
		switch t := state["Type"]; t {
		case "Task":
			out, err = m.journaledTask(ctx, name, state, input, item)
		case "Map":
			out, err = m.mapState(ctx, name, state, input)
		case "Pass":
			out, err = pass(state, input, item)
		case "Choice":
			name, err = choose(state, input)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			continue
		case "Succeed":
			return input, nil
		case "Fail":
			return nil, fmt.Errorf("state %s failed: %v", name, state["Error"])
		default:
			return nil, fmt.Errorf("state %s: type %v is not supported locally", name, t)
		}
		if err != nil {
			return nil, fmt.Errorf("state %s: %w", name, err)
		}
		if input, err = resultPath(state, input, out); err != nil {
			return nil, fmt.Errorf("state %s: %w", name, err)
		}
		if end, _ := state["End"].(bool); end {
			return input, nil
		}
		name, _ = state["Next"].(string)
	}
}

// Self is what $$.StateMachine.Id names locally: the machine running.
const Self = "local:stateMachine:self"

// task invokes the state's function with its Parameters, retrying as its
// Retry says, and returns its OutputPath of {"Payload": response}; or runs
// the machine itself on the Parameters' Input, as a child execution that
// the state waits for, and returns its OutputPath of {"Output": output}.
func (m *Machine) task(ctx context.Context, state map[string]any, input any, item map[string]any) (any, error) {
	params, err := parameters(state["Parameters"], input, item)
	if err != nil {
		return nil, err
	}
	p := asMap(params)
	switch r := state["Resource"]; {
	case r == "arn:aws:states:::states:startExecution.sync:2" && p["StateMachineArn"] == Self:
		out, err := m.run(ctx, m.Definition, p["Input"], nil)
		if err != nil {
			return nil, err
		}
		return path(state["OutputPath"], map[string]any{"Output": out}, nil)
	case r != "arn:aws:states:::lambda:invoke":
		return nil, fmt.Errorf("resource %v with %v is not supported locally", r, p)
	}
	function, _ := p["FunctionName"].(string)
	payload, err := json.Marshal(p["Payload"])
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		m.Invocations.Add(1)
		resp, err := m.Invoke(ctx, function, payload)
		if err == nil {
			var out any
			if err := json.Unmarshal(resp, &out); err != nil {
				return nil, fmt.Errorf("response of %s: %w", function, err)
			}
			return path(state["OutputPath"], map[string]any{"Payload": out}, nil)
		}
		wait, again := retry(state, attempt, errorName(err))
		if !again || ctx.Err() != nil {
			return nil, fmt.Errorf("%s after %d attempts: %w", function, attempt+1, err)
		}
		m.sleep(wait)
	}
}

// journaledTask runs a Task state, unless the Journal holds its output
// from an earlier run of the same state on the same input, and records its
// output when it succeeds: redrive, too, reruns only the states that did
// not succeed, so that what they output (a start time, say) stays.
// A Task of a Map's item is journaled with its item.
func (m *Machine) journaledTask(ctx context.Context, name string, state map[string]any, input any, item map[string]any) (any, error) {
	if item != nil {
		return m.task(ctx, state, input, item)
	}
	id, err := itemID("task "+name, input)
	if err != nil {
		return nil, err
	}
	if out, ok := m.Journal.output(id); ok {
		return out, nil
	}
	out, err := m.task(ctx, state, input, item)
	if err != nil {
		return nil, err
	}
	return out, m.Journal.record(id, out)
}

// retry returns how long to wait before retry number attempt+1 of a task
// that failed with the error named name, and whether its Retry allows one:
// the first retrier naming the error, States.TaskFailed or States.ALL
// decides, as in Step Functions. Every error of a local invocation is a
// States.TaskFailed.
func retry(state map[string]any, attempt int, name string) (time.Duration, bool) {
	for _, r := range asList(state["Retry"]) {
		rule := asMap(r)
		matches := false
		for _, e := range asList(rule["ErrorEquals"]) {
			matches = matches || e == "States.ALL" || e == "States.TaskFailed" || e == name
		}
		if !matches {
			continue
		}
		max := number(rule["MaxAttempts"], 3)
		if float64(attempt) >= max {
			return 0, false
		}
		interval, backoff := number(rule["IntervalSeconds"], 1), number(rule["BackoffRate"], 2)
		return time.Duration(interval * math.Pow(backoff, float64(attempt)) * float64(time.Second)), true
	}
	return 0, false
}

// errorName is the name a Retry's ErrorEquals matches a failed invocation
// by: the errorType a function reported (lambdarun.FunctionError's Type,
// Lambda's own for a timeout), or for a handler called in process the name
// aws-lambda-go gives its error, that of the error's type.
func errorName(err error) string {
	var fe interface{ ErrorType() string }
	if errors.As(err, &fe) {
		return fe.ErrorType()
	}
	t := reflect.TypeOf(err)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}

func (m *Machine) sleep(d time.Duration) {
	if m.Sleep != nil {
		m.Sleep(d)
		return
	}
	time.Sleep(d)
}

// mapState reads the items, selects and batches them as the Map's
// ItemSelector and ItemBatcher say, runs the ItemProcessor on each with at
// most MaxConcurrency at once, and fails when more items fail than
// ToleratedFailurePercentage allows. Its result is the items' outputs.
func (m *Machine) mapState(ctx context.Context, name string, state map[string]any, input any) (any, error) {
	var items []any
	var err error
	if reader, ok := state["ItemReader"]; ok {
		if items, err = m.items(ctx, asMap(reader), input); err != nil {
			return nil, fmt.Errorf("item reader: %w", err)
		}
	} else {
		all, err := path(state["ItemsPath"], input, nil)
		if items, _ = all.([]any); err != nil || items == nil {
			return nil, fmt.Errorf("items path %v: not an array (%v)", state["ItemsPath"], err)
		}
	}
	if sel, ok := state["ItemSelector"]; ok {
		for i, value := range items {
			if items[i], err = parameters(sel, input, map[string]any{"Index": float64(i), "Value": value}); err != nil {
				return nil, fmt.Errorf("item selector: %w", err)
			}
		}
	}
	if b, ok := state["ItemBatcher"]; ok {
		if items, err = batches(asMap(b), input, items); err != nil {
			return nil, fmt.Errorf("item batcher: %w", err)
		}
	}
	processor := asMap(state["ItemProcessor"])
	outputs := make([]any, len(items))
	errs := make([]error, len(items))
	var g errgroup.Group
	limit := int(number(state["MaxConcurrency"], 0))
	if m.MaxConcurrency > 0 && (limit <= 0 || limit > m.MaxConcurrency) {
		limit = m.MaxConcurrency
	}
	if limit > 0 {
		g.SetLimit(limit)
	}
	for i, value := range items {
		g.Go(func() error {
			outputs[i], errs[i] = m.item(ctx, name, processor, value, map[string]any{"Index": float64(i), "Value": value})
			return nil
		})
	}
	g.Wait()
	if err := ctx.Err(); err != nil {
		// Interrupted: every item in flight failed for that one reason.
		return nil, err
	}
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
		}
	}
	if tolerated := number(state["ToleratedFailurePercentage"], 0); failed > 0 && float64(failed)*100 > tolerated*float64(len(items)) {
		return nil, fmt.Errorf("%d of %d items failed: %w", failed, len(items), errors.Join(errs...))
	}
	return outputs, nil
}

// pass returns a Pass state's Parameters, or its input when it has none.
func pass(state map[string]any, input any, item map[string]any) (any, error) {
	if _, ok := state["Result"]; ok {
		return nil, errors.New("a Pass with a Result is not supported locally")
	}
	if _, ok := state["Parameters"]; !ok {
		return input, nil
	}
	return parameters(state["Parameters"], input, item)
}

// item runs the item processor on one item, unless the Journal holds its
// output from an earlier run, and records its output when it succeeds.
func (m *Machine) item(ctx context.Context, mapName string, processor map[string]any, in any, item map[string]any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	id, err := itemID(mapName, in)
	if err != nil {
		return nil, err
	}
	if out, ok := m.Journal.output(id); ok {
		m.done(out, true)
		return out, nil
	}
	out, err := m.run(ctx, processor, in, item)
	if err != nil {
		return nil, err
	}
	if err := m.Journal.record(id, out); err != nil {
		return nil, err
	}
	m.done(out, false)
	return out, nil
}

func (m *Machine) done(out any, earlier bool) {
	if m.ItemDone != nil {
		m.ItemDone(out, earlier)
	}
}

// items reads what a Map iterates over: a JSON array in an object
// (arn:aws:states:::s3:getObject, InputType JSON), or the objects of a
// bucket under a prefix (arn:aws:states:::s3:listObjectsV2), every page.
func (m *Machine) items(ctx context.Context, reader map[string]any, input any) ([]any, error) {
	params, err := parameters(reader["Parameters"], input, nil)
	if err != nil {
		return nil, err
	}
	where := asMap(params)
	bucket, _ := where["Bucket"].(string)
	switch r := reader["Resource"]; {
	case r == "arn:aws:states:::s3:getObject" && asMap(reader["ReaderConfig"])["InputType"] == "JSON":
		key, _ := where["Key"].(string)
		raw, err := m.Read(ctx, bucket, key)
		if err != nil {
			return nil, err
		}
		var items []any
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, fmt.Errorf("s3://%s/%s is not a JSON array: %w", bucket, key, err)
		}
		return items, nil
	case r == "arn:aws:states:::s3:listObjectsV2" && reader["ReaderConfig"] == nil && onlyKeys(where, "Bucket", "Prefix"):
		prefix, _ := where["Prefix"].(string)
		var items []any
		for token := ""; ; {
			page, next, err := m.List(ctx, bucket, prefix, token)
			if err != nil {
				return nil, err
			}
			items = append(items, page...)
			if next == "" {
				return items, nil
			}
			token = next
		}
	default:
		return nil, fmt.Errorf("%v with %v is not supported locally", r, reader)
	}
}

// batches groups items as an ItemBatcher does: each batch is
// {"Items": [...], "BatchInput": ...}, of at most MaxItemsPerBatch items
// and at most MaxInputBytesPerBatch bytes of JSON (256 KiB, the most Step
// Functions allows, when unset).
func batches(batcher map[string]any, input any, items []any) ([]any, error) {
	if !onlyKeys(batcher, "MaxItemsPerBatch", "MaxInputBytesPerBatch", "BatchInput") {
		return nil, fmt.Errorf("%v is not supported locally", batcher)
	}
	maxItems, maxBytes := int(number(batcher["MaxItemsPerBatch"], 0)), int(number(batcher["MaxInputBytesPerBatch"], 256*1024))
	if maxItems < 1 {
		return nil, errors.New("MaxItemsPerBatch must be set locally")
	}
	batchInput, err := parameters(batcher["BatchInput"], input, nil)
	if err != nil {
		return nil, fmt.Errorf("BatchInput: %w", err)
	}
	var out []any
	var batch []any
	size := 0
	flush := func() {
		b := map[string]any{"Items": batch}
		if batchInput != nil {
			b["BatchInput"] = batchInput
		}
		out = append(out, b)
		batch, size = nil, 0
	}
	for _, item := range items {
		raw, err := json.Marshal(item)
		if err != nil {
			return nil, err
		}
		if len(raw) > maxBytes {
			return nil, fmt.Errorf("an item of %d bytes is over MaxInputBytesPerBatch %d", len(raw), maxBytes)
		}
		if len(batch) == maxItems || size+len(raw)+1 > maxBytes {
			flush()
		}
		batch = append(batch, item)
		size += len(raw) + 1
	}
	if len(batch) > 0 {
		flush()
	}
	return out, nil
}

// onlyKeys tells whether m has no key outside keys.
func onlyKeys(m map[string]any, keys ...string) bool {
	for k := range m {
		if !slices.Contains(keys, k) {
			return false
		}
	}
	return true
}

// choose returns the Next of the first rule input matches, or Default.
func choose(state map[string]any, input any) (string, error) {
	for _, c := range asList(state["Choices"]) {
		ok, err := matches(asMap(c), input)
		if err != nil {
			return "", err
		}
		if ok {
			next, _ := asMap(c)["Next"].(string)
			return next, nil
		}
	}
	if d, ok := state["Default"].(string); ok {
		return d, nil
	}
	return "", errors.New("no choice matched and there is no Default")
}

func matches(rule map[string]any, input any) (bool, error) {
	if all, ok := rule["And"]; ok {
		for _, r := range asList(all) {
			if ok, err := matches(asMap(r), input); err != nil || !ok {
				return false, err
			}
		}
		return true, nil
	}
	v, err := path(rule["Variable"], input, nil)
	present := err == nil
	switch {
	case rule["IsPresent"] != nil:
		return present == rule["IsPresent"], nil
	case rule["NumericGreaterThan"] != nil:
		n, ok := v.(float64)
		return present && ok && n > number(rule["NumericGreaterThan"], 0), nil
	}
	return false, fmt.Errorf("choice rule %v is not supported locally", rule)
}

// resultPath places a state's result into its input: ResultPath null keeps
// the input, "$" or none replaces it.
func resultPath(state map[string]any, input, result any) (any, error) {
	rp, set := state["ResultPath"]
	switch {
	case set && rp == nil:
		return input, nil
	case !set, rp == "$":
		return result, nil
	}
	return nil, fmt.Errorf("ResultPath %v is not supported locally", rp)
}

// parameters resolves a Parameters (or ItemSelector) template: a key
// ending in .$ takes the value of its path, others are kept as they are.
func parameters(tpl any, input any, item map[string]any) (any, error) {
	switch t := tpl.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, v := range t {
			if name, ok := strings.CutSuffix(k, ".$"); ok {
				x, err := path(v, input, item)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", k, err)
				}
				out[name] = x
				continue
			}
			x, err := parameters(v, input, item)
			if err != nil {
				return nil, err
			}
			out[k] = x
		}
		return out, nil
	case []any:
		out := make([]any, len(t))
		for i, v := range t {
			x, err := parameters(v, input, item)
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	}
	return tpl, nil
}

// path evaluates $, $.a.b against input, or $$.Map.Item.<...> against the
// Map item; no path (nil) is $.
func path(p any, input any, item map[string]any) (any, error) {
	if p == nil {
		return input, nil
	}
	s, ok := p.(string)
	if !ok {
		return nil, fmt.Errorf("path %v is not a string", p)
	}
	var v any
	var rest string
	switch {
	case s == "$" || strings.HasPrefix(s, "$."):
		v, rest = input, strings.TrimPrefix(s, "$")
	case strings.HasPrefix(s, "$$.Map.Item.") && item != nil:
		v, rest = item, strings.TrimPrefix(s, "$$.Map.Item")
	case s == "$$.StateMachine.Id":
		return Self, nil
	default:
		return nil, fmt.Errorf("path %s is not supported locally", s)
	}
	for _, field := range strings.Split(strings.TrimPrefix(rest, "."), ".") {
		if field == "" {
			continue
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("path %s: no field %s", s, field)
		}
		if v, ok = obj[field]; !ok {
			return nil, fmt.Errorf("path %s: no field %s", s, field)
		}
	}
	return v, nil
}

func asMap(v any) map[string]any { m, _ := v.(map[string]any); return m }
func asList(v any) []any         { l, _ := v.([]any); return l }

func number(v any, def float64) float64 {
	switch n := v.(type) {
	case float64:
		return n
	case int:
		return float64(n)
	}
	return def
}
