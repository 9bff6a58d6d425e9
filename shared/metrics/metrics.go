// Package metrics writes the service's CloudWatch metrics in the Embedded
// Metric Format (EMF): one JSON line per document on the function's stdout,
// which CloudWatch Logs turns into metrics as it ingests the log. No API call
// is made, so a metric costs a request no latency and no permission, and a
// function without network access to CloudWatch still reports.
//
// Every document carries the dimension Function (the Lambda function's name),
// so the same metric of two functions, or of two stacks, stays apart.
package metrics

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultNamespace is the CloudWatch namespace when METRICS_NAMESPACE is unset.
const DefaultNamespace = "Fleet"

// Unit is a CloudWatch unit.
type Unit string

// The units the service uses.
const (
	Count        Unit = "Count"
	Milliseconds Unit = "Milliseconds"
)

// Metric is one value of a document.
type Metric struct {
	Name  string
	Value float64
	Unit  Unit
}

// Dimension is a name and value a document's metrics are filed under. Values
// must be non-empty ASCII; CloudWatch drops a document that breaks this.
type Dimension struct {
	Name, Value string
}

// The service's metrics, in one place so that the code and the alarms of
// template.yaml agree. Each is filed under Function and the dimensions named.
const (
	// ColdStarts counts first invocations of a container.
	ColdStarts = "ColdStarts"
	// ServerErrors counts API answers with a 5xx status.
	ServerErrors = "ServerErrors"
	// BackendThrottles counts DynamoDB and S3 attempts refused for
	// throttling (the SDK retries them; a sustained count is the alarm).
	BackendThrottles = "BackendThrottles"

	// LossesHeld counts the machines a report would have marked DEAD and
	// the mass-loss brake did not: a broken reporter or a partition, until
	// an operator confirms the loss. Any is the alarm.
	LossesHeld = "LossesHeld"
	// ReportsTooLarge counts the report objects refused for expanding to
	// more than the function reads (a decompression bomb, or a fleet past
	// what its memory carries). Any is the alarm.
	ReportsTooLarge = "ReportsTooLarge"

	// StateChanges counts slave changes, by Action (freeze, decommission,
	// activate, delete, delete-expiring, delete-dead) and Result (ok,
	// refused, failed: the class of the answer's status).
	StateChanges = "StateChanges"

	// LogLookups counts log lookups by Scope (task, request, deploy,
	// search); LogObjects counts the logs they answered with, S3Calls the
	// S3 attempts they made.
	LogLookups = "LogLookups"
	LogObjects = "LogObjects"
	S3Calls    = "S3Calls"
	// MissingLogBuckets counts, per lookup that met any, the buckets of
	// LOG_BUCKETS that do not exist: a misconfiguration, answered with
	// what the other buckets hold. Any is the alarm.
	MissingLogBuckets = "MissingLogBuckets"
	// ListedLogBuckets counts, per lookup, the buckets of LOG_BUCKETS it
	// answered by listing although the index is on: buckets not known
	// complete in the index (docs/behaviour.md "Reconciliation").
	ListedLogBuckets = "ListedLogBuckets"

	// The drift a reconciliation of the task-log index found and fixed (its
	// log lines name the bucket): logs S3 holds that the index lacked (added), logs the index
	// held that S3 no longer holds (removed), logs written again since the
	// index recorded them (updated). Any is the alarm: events were lost.
	ReconcileAdded   = "ReconcileAdded"
	ReconcileRemoved = "ReconcileRemoved"
	ReconcileUpdated = "ReconcileUpdated"

	// The expiry trigger's outcomes per run (docs/behaviour.md "Expiring changes"): records applied,
	// skipped, dropped, superseded, deferred under the decommission limit,
	// failed, and left unstarted at the deadline.
	ExpiryApplied    = "ExpiryApplied"
	ExpirySkipped    = "ExpirySkipped"
	ExpiryDropped    = "ExpiryDropped"
	ExpirySuperseded = "ExpirySuperseded"
	ExpiryDeferred   = "ExpiryDeferred"
	ExpiryFailed     = "ExpiryFailed"
	ExpiryRemaining  = "ExpiryRemaining"
	// ExpiryLag is how long (ms) the oldest due record had been due when a
	// run started; deferred records aside, which wait by design.
	ExpiryLag = "ExpiryLag"
)

// Emitter writes documents to one writer. Its methods are safe for
// concurrent use, and those of a nil *Emitter do nothing, so code run without
// metrics (tests, the local server) needs no check.
type Emitter struct {
	w         io.Writer
	namespace string
	function  string
	now       func() time.Time

	mu      sync.Mutex // one document per Write, never interleaved
	invoked atomic.Bool
}

// New returns an emitter of documents in namespace, with the dimension
// Function set to function ("local" when empty, as outside Lambda), written
// to w. It fails when CloudWatch would reject the namespace.
func New(w io.Writer, namespace, function string) (*Emitter, error) {
	if err := checkNamespace(namespace); err != nil {
		return nil, err
	}
	return &Emitter{w: w, namespace: namespace, function: cmp.Or(function, "local"), now: time.Now}, nil
}

// FromEnv returns the emitter of a Lambda function: namespace
// METRICS_NAMESPACE (DefaultNamespace when unset), Function
// AWS_LAMBDA_FUNCTION_NAME. The error names the variable.
func FromEnv(w io.Writer, getenv func(string) string) (*Emitter, error) {
	e, err := New(w, cmp.Or(getenv("METRICS_NAMESPACE"), DefaultNamespace), getenv("AWS_LAMBDA_FUNCTION_NAME"))
	if err != nil {
		return nil, fmt.Errorf("METRICS_NAMESPACE: %w", err)
	}
	return e, nil
}

// checkNamespace applies CloudWatch's rules for a custom namespace.
func checkNamespace(ns string) error {
	switch {
	case ns == "" || len(ns) > 255:
		return fmt.Errorf("namespace %q must be 1 to 255 characters", ns)
	case strings.HasPrefix(ns, "AWS/"):
		return fmt.Errorf("namespace %q is reserved for AWS services", ns)
	case strings.TrimLeft(ns, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_/#: ") != "":
		return fmt.Errorf("namespace %q may hold only letters, digits, spaces and .-_/#: characters", ns)
	}
	return nil
}

// Invocation counts a cold start (ColdStarts = 1) the first time it is
// called and does nothing after. main builds one emitter per container and
// the handler calls Invocation on every invocation, so the first one is the
// container's first.
func (e *Emitter) Invocation() {
	if e == nil || e.invoked.Swap(true) {
		return
	}
	e.Emit(nil, Metric{Name: ColdStarts, Value: 1, Unit: Count})
}

// Emit writes one document holding metrics, filed under Function and dims.
// Metrics whose value is not a finite number, which JSON cannot hold, are
// left out; a document left with no metric is not written.
func (e *Emitter) Emit(dims []Dimension, metrics ...Metric) {
	if e == nil {
		return
	}
	line, ok := e.document(dims, metrics)
	if !ok {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	// A failed write to stdout has nowhere to be reported; the metric is lost.
	_, _ = e.w.Write(line)
}

// directive is the _aws member of a document (the EMF specification's
// metadata object).
type directive struct {
	Timestamp         int64             `json:"Timestamp"` // epoch ms
	CloudWatchMetrics []metricDirective `json:"CloudWatchMetrics"`
}

type metricDirective struct {
	Namespace  string       `json:"Namespace"`
	Dimensions [][]string   `json:"Dimensions"`
	Metrics    []definition `json:"Metrics"`
}

type definition struct {
	Name string `json:"Name"`
	Unit Unit   `json:"Unit,omitempty"`
}

// document renders one EMF document: the _aws directive, then each
// dimension and metric value as a member of the root object, as the
// specification wants them.
func (e *Emitter) document(dims []Dimension, metrics []Metric) ([]byte, bool) {
	root := make(map[string]any, 2+len(dims)+len(metrics))
	names := []string{"Function"}
	root["Function"] = e.function
	for _, d := range dims {
		names = append(names, d.Name)
		root[d.Name] = d.Value
	}
	md := metricDirective{Namespace: e.namespace, Dimensions: [][]string{names}}
	for _, m := range metrics {
		if math.IsNaN(m.Value) || math.IsInf(m.Value, 0) {
			continue
		}
		md.Metrics = append(md.Metrics, definition{Name: m.Name, Unit: m.Unit})
		root[m.Name] = m.Value
	}
	if len(md.Metrics) == 0 {
		return nil, false
	}
	root["_aws"] = directive{Timestamp: e.now().UnixMilli(), CloudWatchMetrics: []metricDirective{md}}
	line, err := json.Marshal(root)
	if err != nil {
		return nil, false
	}
	return append(line, '\n'), true
}
