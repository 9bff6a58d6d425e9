package metrics

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// emf is an EMF document as CloudWatch reads it.
type emf struct {
	AWS struct {
		Timestamp         *int64 `json:"Timestamp"`
		CloudWatchMetrics []struct {
			Namespace  string     `json:"Namespace"`
			Dimensions [][]string `json:"Dimensions"`
			Metrics    []struct {
				Name string `json:"Name"`
				Unit string `json:"Unit"`
			} `json:"Metrics"`
		} `json:"CloudWatchMetrics"`
	} `json:"_aws"`
	root map[string]any
}

// documents decodes every line of buf as an EMF document and checks what
// the specification requires of it: one JSON object per line, a Timestamp,
// and a root member for every dimension and metric it declares, metrics as
// numbers and dimensions as non-empty strings.
func documents(t *testing.T, buf *bytes.Buffer) []emf {
	t.Helper()
	var out []emf
	sc := bufio.NewScanner(bytes.NewReader(buf.Bytes()))
	for sc.Scan() {
		var d emf
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("line %q is not JSON: %v", sc.Text(), err)
		}
		if err := json.Unmarshal(sc.Bytes(), &d.root); err != nil {
			t.Fatalf("line %q is not a JSON object: %v", sc.Text(), err)
		}
		if d.AWS.Timestamp == nil {
			t.Errorf("line %s: got no _aws.Timestamp", sc.Text())
		}
		if len(d.AWS.CloudWatchMetrics) == 0 {
			t.Errorf("line %s: got no _aws.CloudWatchMetrics", sc.Text())
		}
		for _, md := range d.AWS.CloudWatchMetrics {
			for _, set := range md.Dimensions {
				for _, name := range set {
					if v, ok := d.root[name].(string); !ok || v == "" {
						t.Errorf("line %s: got dimension %s = %v, want a non-empty string member", sc.Text(), name, d.root[name])
					}
				}
			}
			for _, m := range md.Metrics {
				if _, ok := d.root[m.Name].(float64); !ok {
					t.Errorf("line %s: got metric %s = %v, want a number member", sc.Text(), m.Name, d.root[m.Name])
				}
			}
		}
		out = append(out, d)
	}
	return out
}

func fixedClock(e *Emitter, at time.Time) { e.now = func() time.Time { return at } }

func TestEmitWritesOneEMFDocument(t *testing.T) {
	var buf bytes.Buffer
	e, err := New(&buf, "Fleet", "fleet-SlavesFunction-1")
	if err != nil {
		t.Fatal(err)
	}
	at := time.UnixMilli(1793491200123)
	fixedClock(e, at)
	e.Emit([]Dimension{{"Action", "freeze"}, {"Result", "ok"}},
		Metric{Name: "StateChanges", Value: 1, Unit: Count},
		Metric{Name: "Lag", Value: 1500, Unit: Milliseconds})

	docs := documents(t, &buf)
	if len(docs) != 1 {
		t.Fatalf("got %d documents, want 1: %s", len(docs), buf.String())
	}
	d := docs[0]
	if *d.AWS.Timestamp != at.UnixMilli() {
		t.Errorf("got Timestamp %d, want %d", *d.AWS.Timestamp, at.UnixMilli())
	}
	md := d.AWS.CloudWatchMetrics[0]
	if md.Namespace != "Fleet" {
		t.Errorf("got Namespace %q, want Fleet", md.Namespace)
	}
	if want := [][]string{{"Function", "Action", "Result"}}; !reflect.DeepEqual(md.Dimensions, want) {
		t.Errorf("got Dimensions %v, want %v", md.Dimensions, want)
	}
	var defs []string
	for _, m := range md.Metrics {
		defs = append(defs, m.Name+"/"+m.Unit)
	}
	if want := []string{"StateChanges/Count", "Lag/Milliseconds"}; !reflect.DeepEqual(defs, want) {
		t.Errorf("got Metrics %v, want %v", defs, want)
	}
	want := map[string]any{"Function": "fleet-SlavesFunction-1", "Action": "freeze", "Result": "ok", "StateChanges": 1.0, "Lag": 1500.0}
	for k, v := range want {
		if d.root[k] != v {
			t.Errorf("got %s = %v, want %v", k, d.root[k], v)
		}
	}
	if len(d.root) != len(want)+1 {
		t.Errorf("got members %v, want only _aws and %v", d.root, want)
	}
	if !strings.HasSuffix(buf.String(), "}\n") || strings.Count(buf.String(), "\n") != 1 {
		t.Errorf("got %q, want one line", buf.String())
	}
}

func TestEmitLeavesOutWhatCloudWatchWouldReject(t *testing.T) {
	var buf bytes.Buffer
	e, _ := New(&buf, "Fleet", "f")
	e.Emit(nil, Metric{Name: "Bad", Value: math.NaN(), Unit: Count}, Metric{Name: "Good", Value: 2, Unit: Count})
	e.Emit(nil, Metric{Name: "Inf", Value: math.Inf(1), Unit: Count})
	e.Emit(nil)

	docs := documents(t, &buf)
	if len(docs) != 1 {
		t.Fatalf("got %d documents, want 1 (the others have no finite metric): %s", len(docs), buf.String())
	}
	if ms := docs[0].AWS.CloudWatchMetrics[0].Metrics; len(ms) != 1 || ms[0].Name != "Good" {
		t.Errorf("got metrics %+v, want Good only", ms)
	}
	if _, ok := docs[0].root["Bad"]; ok {
		t.Errorf("got member Bad, want NaN left out")
	}
}

func TestInvocationCountsOnlyTheFirstAsAColdStart(t *testing.T) {
	var buf bytes.Buffer
	e, _ := New(&buf, "Fleet", "fleet-ExpiryFunction-1")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(e.Invocation)
	}
	wg.Wait()
	e.Invocation()

	docs := documents(t, &buf)
	if len(docs) != 1 {
		t.Fatalf("got %d documents, want 1 cold start: %s", len(docs), buf.String())
	}
	if got := docs[0].root[ColdStarts]; got != 1.0 {
		t.Errorf("got %s = %v, want 1", ColdStarts, got)
	}
	if got := docs[0].AWS.CloudWatchMetrics[0].Dimensions; !reflect.DeepEqual(got, [][]string{{"Function"}}) {
		t.Errorf("got Dimensions %v, want [[Function]]", got)
	}
}

func TestConcurrentEmitsStayWholeLines(t *testing.T) {
	var buf bytes.Buffer
	e, _ := New(&buf, "Fleet", "f")
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			e.Emit([]Dimension{{"Scope", "task"}}, Metric{Name: "LogObjects", Value: float64(i), Unit: Count})
		})
	}
	wg.Wait()
	if got := len(documents(t, &buf)); got != 50 {
		t.Errorf("got %d documents, want 50", got)
	}
}

func TestANilEmitterDoesNothing(t *testing.T) {
	var e *Emitter
	e.Invocation()
	e.Emit(nil, Metric{Name: "X", Value: 1, Unit: Count})
}

func TestFromEnv(t *testing.T) {
	tests := []struct {
		name          string
		env           map[string]string
		wantNamespace string
		wantFunction  string
		wantErr       string
	}{
		{name: "the namespace defaults to Fleet", env: map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "fleet-LogsFunction-9"},
			wantNamespace: "Fleet", wantFunction: "fleet-LogsFunction-9"},
		{name: "METRICS_NAMESPACE names the namespace", env: map[string]string{"METRICS_NAMESPACE": "Fleet/staging", "AWS_LAMBDA_FUNCTION_NAME": "f"},
			wantNamespace: "Fleet/staging", wantFunction: "f"},
		{name: "outside Lambda the function is local", env: map[string]string{}, wantNamespace: "Fleet", wantFunction: "local"},
		{name: "an AWS namespace is refused", env: map[string]string{"METRICS_NAMESPACE": "AWS/Lambda"}, wantErr: "reserved"},
		{name: "a namespace with odd characters is refused", env: map[string]string{"METRICS_NAMESPACE": "Fleet$"}, wantErr: "may hold only"},
		{name: "a namespace too long is refused", env: map[string]string{"METRICS_NAMESPACE": strings.Repeat("n", 256)}, wantErr: "1 to 255"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			e, err := FromEnv(&buf, func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "METRICS_NAMESPACE") {
					t.Fatalf("got error %v, want one naming METRICS_NAMESPACE and saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			e.Emit(nil, Metric{Name: "X", Value: 1, Unit: Count})
			d := documents(t, &buf)[0]
			if got := d.AWS.CloudWatchMetrics[0].Namespace; got != tt.wantNamespace {
				t.Errorf("got namespace %q, want %q", got, tt.wantNamespace)
			}
			if got := d.root["Function"]; got != tt.wantFunction {
				t.Errorf("got Function %v, want %q", got, tt.wantFunction)
			}
		})
	}
}

// BenchmarkEmit is the cost a state change or a log lookup pays for its
// document.
func BenchmarkEmit(b *testing.B) {
	e, _ := New(io.Discard, "Fleet", "fleet-SlavesFunction-1")
	dims := []Dimension{{"Action", "freeze"}, {"Result", "ok"}}
	b.ReportAllocs()
	for b.Loop() {
		e.Emit(dims, Metric{Name: StateChanges, Value: 1, Unit: Count})
	}
}
