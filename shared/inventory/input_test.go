package inventory

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// sample reads a file of events/.
func sample(t *testing.T, name string) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "events", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeReadsEachInputAsTheShapeItsFieldsName(t *testing.T) {
	split := Split{Report: "r1", Bucket: "reportsbucket", Manifest: "reports-work/r1/manifest.json", Parts: 3, Absences: "reports-work/r1/absent.json", At: 1_793_491_200_000}
	object := sample(t, "inventory-report-object.json")
	madeAt := func(s string) time.Time { at, _ := time.Parse(time.RFC3339, s); return at }
	tests := []struct {
		name string
		in   json.RawMessage
		want Input
	}{
		{"the MachineReport rule's event", sample(t, "inventory-machine-report.json"), ReportEvent{}},
		{"the MachineReport rule's event of a loss", sample(t, "inventory-machine-lost.json"), ReportEvent{}},
		{"a report sent by a direct invocation", sample(t, "inventory-machine-report-detail.json"), Report{}},
		{"S3's event of a report object", object, ObjectEvent{Time: madeAt("2026-11-21T05:15:00Z"), Bucket: "reportsbucket", Key: "reports/2026-11-21T05:15:00Z.json", event: object}},
		{"a report with fields of other names", json.RawMessage(`{"Step":"plan","Detail-Type":"x","machines":[]}`), Report{}},
		{"the plan step of S3's event", json.RawMessage(`{"step":"plan","event":` + string(object) + `}`),
			PlanStep{Event: ObjectEvent{Time: madeAt("2026-11-21T05:15:00Z"), Bucket: "reportsbucket", Key: "reports/2026-11-21T05:15:00Z.json", event: bytes.TrimSpace(object)}}},
		{"the plan step of a report", json.RawMessage(`{"step":"plan","event":{"machines":[]}}`), PlanStep{Event: Report{body: json.RawMessage(`{"machines":[]}`)}}},
		{"a part step", json.RawMessage(`{"step":"applyPart","report":"r1","bucket":"reportsbucket","key":"reports-work/r1/part-0001.json"}`),
			PartStep{Split: Split{Report: "r1", Bucket: "reportsbucket"}, Key: "reports-work/r1/part-0001.json"}},
		{"the finish step", json.RawMessage(`{"step":"finish","report":"r1","bucket":"reportsbucket","manifest":"reports-work/r1/manifest.json","parts":3,"absences":"reports-work/r1/absent.json","at":1793491200000}`),
			FinishStep{Split: split}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode(tt.in)
			if err != nil {
				t.Fatalf("got %v, want %T", err, tt.want)
			}
			if reflect.TypeOf(got) != reflect.TypeOf(tt.want) {
				t.Fatalf("got %T, want %T", got, tt.want)
			}
			switch tt.want.(type) {
			case ObjectEvent, PlanStep, PartStep, FinishStep:
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("got %+v, want %+v", got, tt.want)
				}
			}
		})
	}
}

func TestDecodeRefusesAnInputOfNoShapeOrOfTwo(t *testing.T) {
	report := string(sample(t, "inventory-machine-report.json"))
	tests := []struct {
		name, in, want string
	}{
		{"a step that is also a report", `{"step":"plan","event":{"machines":[]},"machines":[]}`, `has the fields of a step of ReportStateMachine ("step") and of a machine report ("machines")`},
		{"an event that is also a report", `{"detail-type":"Machine Report","detail":{"machines":[]},"machines":[]}`, `has the fields of an EventBridge event`},
		{"a step that is also an event", `{"step":"finish","detail-type":"Object Created"}`, `has the fields of a step of ReportStateMachine ("step") and of an EventBridge event`},
		{"a scheduled job's input", `{"job":"expiry"}`, `is none of InventoryFunction's`},
		{"an empty object", `{}`, `is none of InventoryFunction's`},
		{"a list", `[{"machines":[]}]`, "not a JSON object"},
		{"null", `null`, "not a JSON object"},
		{"text that is not JSON", `machines`, "not a JSON object"},
		{"a step of no name the state machine gives", `{"step":"part","key":"reports-work/r1/part-0001.json"}`, `step "part" is none of plan, applyPart, finish`},
		{"the plan step of a step", `{"step":"plan","event":{"step":"finish"}}`, "the plan step's event is a step"},
		{"the plan step of nothing", `{"step":"plan"}`, "the plan step's event: the input is not a JSON object"},
		{"an event of another detail-type", `{"detail-type":"Scheduled Event","detail":{}}`, `event detail-type "Scheduled Event" is neither`},
		{"a detail without a detail-type", `{"detail":{"machines":[]}}`, `event detail-type "" is neither`},
		{"an Object Created event of another source", strings.Replace(string(sample(t, "inventory-report-object.json")), `"aws.s3"`, `"my.app"`, 1), `from source "my.app", not aws.s3`},
		{"a report event whose detail-type is not a string", strings.Replace(report, `"Machine Report"`, `7`, 1), "EventBridge event: json: cannot unmarshal number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode(json.RawMessage(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %s, %v, want an error saying %q", describe(got), err, tt.want)
			}
		})
	}
}

func describe(in Input) string {
	if in == nil {
		return "no input"
	}
	return fmt.Sprintf("%T", in)
}
