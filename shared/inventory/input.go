package inventory

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fleetops/fleet/shared/exactjson"
)

// The inputs of InventoryFunction, one type each, and one entry point of
// Handler each (docs/architecture.md "InventoryFunction's inputs"). Decode
// tells them apart by the field that names each, never by trying one after
// another:
//
//	"step"                          a step of ReportStateMachine: PlanStep, PartStep or FinishStep, by its value
//	"detail-type" (or "detail")     an EventBridge event, by detail-type:
//	  "Machine Report"              the MachineReport rule's: ReportEvent
//	  "Object Created"              S3's, with "source": "aws.s3": ObjectEvent
//	"machines"                      a report itself, as a direct invocation sends it: Report
//
// An input with the naming fields of two shapes, or of none, is refused.

// Input is one of the input types: ReportEvent, Report, ObjectEvent,
// PlanStep, PartStep or FinishStep.
type Input interface{ input() }

// Source is an input that brings a report: ReportEvent, Report or
// ObjectEvent. The plan step plans one.
type Source interface {
	Input
	// raw is the input as received, which names the report (reportID).
	raw() json.RawMessage
}

// ReportEvent is the event of the MachineReport rule: EventBridge's
// "Machine Report" event, the report inline as its detail, made at Time.
type ReportEvent struct {
	Time   time.Time
	Detail json.RawMessage
	event  json.RawMessage
}

// Report is a report itself, as a direct invocation sends it (the detail of
// a "Machine Report" event); it was made when it is received.
type Report struct{ body json.RawMessage }

// ObjectEvent is S3's "Object Created" event, through EventBridge: the
// report object Key of Bucket, created at Time.
type ObjectEvent struct {
	Time        time.Time
	Bucket, Key string
	event       json.RawMessage
}

// PlanStep is ReportStateMachine's first step: plan the report Event
// brings, and apply it or write it in parts.
type PlanStep struct{ Event Source }

// PartStep is a step of ReportStateMachine's map: apply the part Key of a
// report written in parts.
type PartStep struct {
	Split
	Key string
}

// FinishStep is ReportStateMachine's last step after the parts: apply the
// report's absences.
type FinishStep struct{ Split }

func (ReportEvent) input() {}
func (Report) input()      {}
func (ObjectEvent) input() {}
func (PlanStep) input()    {}
func (PartStep) input()    {}
func (FinishStep) input()  {}

func (e ReportEvent) raw() json.RawMessage { return e.event }
func (r Report) raw() json.RawMessage      { return r.body }
func (e ObjectEvent) raw() json.RawMessage { return e.event }

// Decode reads an input of InventoryFunction as the one shape its fields
// name. Keys match exactly: "Step" or "Detail-Type" names nothing.
func Decode(in json.RawMessage) (Input, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(in, &fields); err != nil {
		return nil, fmt.Errorf("the input is not a JSON object: %w", err)
	}
	if fields == nil {
		return nil, errors.New("the input is not a JSON object: null")
	}
	var named []string
	_, isStep := fields["step"]
	_, isEvent := fields["detail-type"]
	if _, detail := fields["detail"]; detail {
		isEvent = true
	}
	_, isReport := fields["machines"]
	if isStep {
		named = append(named, `a step of ReportStateMachine ("step")`)
	}
	if isEvent {
		named = append(named, `an EventBridge event ("detail-type", "detail")`)
	}
	if isReport {
		named = append(named, `a machine report ("machines")`)
	}
	switch {
	case len(named) > 1:
		return nil, fmt.Errorf("the input has the fields of %s: it must be one", strings.Join(named, " and of "))
	case isStep:
		return decodeStep(in)
	case isEvent:
		return decodeEvent(in)
	case isReport:
		return Report{body: in}, nil
	}
	return nil, errors.New(`the input is none of InventoryFunction's: no step of ReportStateMachine (no "step"), ` +
		`no EventBridge event (no "detail-type"), and no report: machine report has no "machines" list`)
}

// step is the wire form of a step, as template.yaml's state machine
// builds it.
type step struct {
	Step  string          `json:"step"`
	Event json.RawMessage `json:"event"`
	Split
	Key string `json:"key"` // the part
}

func decodeStep(in json.RawMessage) (Input, error) {
	var st step
	if err := exactjson.Unmarshal(in, &st); err != nil {
		return nil, fmt.Errorf("step: %w", err)
	}
	switch st.Step {
	case StepPlan:
		inner, err := Decode(st.Event)
		if err != nil {
			return nil, fmt.Errorf("the plan step's event: %w", err)
		}
		src, ok := inner.(Source)
		if !ok {
			return nil, errors.New("the plan step's event is a step: it must bring a report")
		}
		return PlanStep{Event: src}, nil
	case StepApplyPart:
		return PartStep{Split: st.Split, Key: st.Key}, nil
	case StepFinish:
		return FinishStep{Split: st.Split}, nil
	}
	return nil, fmt.Errorf("step %q is none of %s, %s, %s", st.Step, StepPlan, StepApplyPart, StepFinish)
}

// eventBridge is the envelope of an EventBridge event.
type eventBridge struct {
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Time       time.Time       `json:"time"`
	Detail     json.RawMessage `json:"detail"`
}

func decodeEvent(in json.RawMessage) (Input, error) {
	var env eventBridge
	if err := exactjson.Unmarshal(in, &env); err != nil {
		return nil, fmt.Errorf("EventBridge event: %w", err)
	}
	switch {
	case env.DetailType == DetailType:
		return ReportEvent{Time: env.Time, Detail: env.Detail, event: in}, nil
	case env.DetailType == ObjectCreated && env.Source == "aws.s3":
		var d objectDetail
		if err := exactjson.Unmarshal(env.Detail, &d); err != nil {
			return nil, fmt.Errorf("object created event detail: %w", err)
		}
		return ObjectEvent{Time: env.Time, Bucket: d.Bucket.Name, Key: d.Object.Key, event: in}, nil
	case env.DetailType == ObjectCreated:
		return nil, fmt.Errorf("an %q event from source %q, not aws.s3, is no report object", ObjectCreated, env.Source)
	}
	return nil, fmt.Errorf("event detail-type %q is neither %q nor %q", env.DetailType, DetailType, ObjectCreated)
}
