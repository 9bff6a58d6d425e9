package inventory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"

	"github.com/fleetops/fleet/shared/exactjson"
	"github.com/fleetops/fleet/shared/machine"
)

// The steps of a report applied in parts, as the state machine of
// template.yaml (ReportStateMachine) invokes the function: the plan step
// reads and plans the whole report and, when its changes are more than one
// part, writes them in parts; each part is applied on its own, as many at a
// time as the state machine allows and retried alone; the finish step
// applies the report's absences once every part is applied
// (docs/architecture.md "Reports in parts").
const (
	StepPlan      = "plan"
	StepApplyPart = "applyPart"
	StepFinish    = "finish"
)

// WorkPrefix is where the parts of reports being applied are written in the
// reports bucket; the bucket's lifecycle rule expires them.
const WorkPrefix = "reports-work/"

// Split is a report the plan step wrote in parts: what the state machine
// hands the other steps.
type Split struct {
	Report   string `json:"report"`   // the report's id
	Bucket   string `json:"bucket"`   // where its parts are
	Manifest string `json:"manifest"` // the key of the list of its parts, [{"key": …}, …]
	Parts    int    `json:"parts"`
	Absences string `json:"absences"` // the key of its absences, applied by the finish step
	At       int64  `json:"at"`       // the report's time, epoch ms
}

// Marks records the newest report started, so that a report applied in
// parts does not apply its absences after a newer report has started.
type Marks interface {
	// StartReport records the report id made at at, unless a report made
	// later is recorded.
	StartReport(ctx context.Context, at int64, id string) error
	// NewestReport returns the time and id of the newest report recorded.
	NewestReport(ctx context.Context) (int64, string, error)
}

// Parts writes and reads the parts of reports in the reports bucket.
type Parts interface {
	Objects
	Put(ctx context.Context, bucket, key string, body []byte) error
}

// FansOut has h record every report it applies in marks and, as the plan
// step, split a report that changes more than partSize machines into parts
// of partSize written through parts (REPORT_PART_SIZE); it returns h.
func (h *Handler) FansOut(marks Marks, parts Parts, partSize int) *Handler {
	h.marks, h.parts, h.partSize = marks, parts, partSize
	return h
}

// reportID names a report after the event that brought it: a redelivery of
// the event, or a retry of the plan step, writes the same parts again.
func reportID(event json.RawMessage) string {
	sum := sha256.Sum256(event)
	return hex.EncodeToString(sum[:12])
}

// partEntry is one observation as a part holds it.
type partEntry struct {
	ID           string            `json:"id"`
	Host         string            `json:"host,omitempty"`
	RackID       string            `json:"rackId,omitempty"`
	Attributes   map[string]string `json:"attributes,omitempty"`
	Resources    json.RawMessage   `json:"resources,omitempty"`
	Lost         bool              `json:"lost,omitempty"`
	RunningTasks *int              `json:"runningTasks,omitempty"`
	Absent       bool              `json:"absent,omitempty"`
	Held         bool              `json:"held,omitempty"`
	At           int64             `json:"at"`
	// New says the plan's scan did not find the machine: it is created
	// with the others of its part that are new (apply). Only a hint: each
	// create is conditioned on the machine's absence, and one that exists
	// is applied as any other.
	New bool `json:"new,omitempty"`
}

func encodePart(obs []machine.Observation, fresh map[string]bool) ([]byte, error) {
	out := make([]partEntry, len(obs))
	for i, o := range obs {
		out[i] = partEntry{ID: o.ID, Host: o.Host, RackID: o.RackID, Attributes: o.Attributes, Resources: o.Resources,
			Lost: o.Lost, RunningTasks: o.RunningTasks, Absent: o.Absent, Held: o.Held, At: o.At, New: fresh[o.ID]}
	}
	return json.Marshal(out)
}

// readPart reads a part back, and the ids of its entries marked new. Parts
// are written by the plan step, but read as untrusted all the same: a part
// larger than a report may be, text that is not valid, or an entry without
// a valid id fails the part.
func (h *Handler) readPart(ctx context.Context, bucket, key string) ([]machine.Observation, map[string]bool, error) {
	body, err := h.parts.Open(ctx, bucket, key)
	if err != nil {
		return nil, nil, fmt.Errorf("part %s: %w", key, err)
	}
	defer body.Close()
	raw, err := io.ReadAll(io.LimitReader(body, h.bound.Bytes+1))
	if err != nil {
		return nil, nil, fmt.Errorf("part %s: %w", key, err)
	}
	if int64(len(raw)) > h.bound.Bytes {
		return nil, nil, fmt.Errorf("part %s is larger than %d bytes, which no plan step writes", key, h.bound.Bytes)
	}
	if err := exactjson.ValidText(raw); err != nil {
		return nil, nil, fmt.Errorf("part %s is not valid text: %w", key, err)
	}
	var entries []partEntry
	if err := exactjson.Unmarshal(raw, &entries); err != nil {
		return nil, nil, fmt.Errorf("part %s: %w", key, err)
	}
	obs := make([]machine.Observation, len(entries))
	fresh := map[string]bool{}
	for i, e := range entries {
		if err := machine.ValidateID(e.ID); err != nil {
			return nil, nil, fmt.Errorf("part %s entry %d: %w", key, i, err)
		}
		obs[i] = machine.Observation{ID: e.ID, Host: e.Host, RackID: e.RackID, Attributes: e.Attributes, Resources: e.Resources,
			Lost: e.Lost, RunningTasks: e.RunningTasks, Absent: e.Absent, Held: e.Held, At: e.At}
		if e.New {
			fresh[e.ID] = true
		}
	}
	return obs, fresh, nil
}

// split writes a planned report in parts: its present machines in parts of
// h.partSize, listed in a manifest, and its absences on their own.
func (h *Handler) split(ctx context.Context, id string, at int64, obs []machine.Observation, fresh map[string]bool) (*Split, error) {
	prefix := WorkPrefix + id + "/"
	s := &Split{Report: id, Bucket: h.bucket, Manifest: prefix + "manifest.json", Absences: prefix + "absent.json", At: at}
	var present, absent []machine.Observation
	for _, o := range obs {
		if o.Absent {
			absent = append(absent, o)
		} else {
			present = append(present, o)
		}
	}
	type item struct {
		Key string `json:"key"`
	}
	manifest := []item{}
	for start := 0; start < len(present); start += h.partSize {
		key := fmt.Sprintf("%spart-%04d.json", prefix, len(manifest))
		if err := h.putPart(ctx, key, present[start:min(start+h.partSize, len(present))], fresh); err != nil {
			return nil, err
		}
		manifest = append(manifest, item{key})
	}
	if err := h.putPart(ctx, s.Absences, absent, nil); err != nil {
		return nil, err
	}
	body, err := json.Marshal(manifest)
	if err != nil {
		return nil, err
	}
	s.Parts = len(manifest)
	return s, h.parts.Put(ctx, h.bucket, s.Manifest, body)
}

func (h *Handler) putPart(ctx context.Context, key string, obs []machine.Observation, fresh map[string]bool) error {
	body, err := encodePart(obs, fresh)
	if err != nil {
		return err
	}
	return h.parts.Put(ctx, h.bucket, key, body)
}

// ApplyPart is a step of ReportStateMachine's map: it applies one part.
// Applying it again writes nothing for what it already applied (each
// machine is decided again on what is stored), so a part cut short by a
// timeout or a crash is simply retried.
func (h *Handler) ApplyPart(ctx context.Context, st PartStep) (Result, error) {
	return h.run(ctx, StepApplyPart, func(ctx context.Context, now int64) (Result, []error, error) {
		if err := h.checkWork(st.Bucket, st.Key); err != nil {
			return Result{}, nil, err
		}
		obs, fresh, err := h.readPart(ctx, st.Bucket, st.Key)
		if err != nil {
			return Result{}, nil, err
		}
		return Result{Machines: len(obs), Changed: len(obs)}, h.apply(ctx, obs, fresh, now), nil
	})
}

// Finish is ReportStateMachine's last step: it applies the report's
// absences, once every part is applied, unless a newer report has started
// since this one did: its absences would then be judged on older evidence
// than what is being applied.
func (h *Handler) Finish(ctx context.Context, st FinishStep) (Result, error) {
	return h.run(ctx, StepFinish, func(ctx context.Context, now int64) (Result, []error, error) {
		if err := h.checkWork(st.Bucket, st.Absences); err != nil {
			return Result{}, nil, err
		}
		newest, id, err := h.marks.NewestReport(ctx)
		if err != nil {
			return Result{}, nil, err
		}
		if newest > st.At || newest == st.At && id != st.Report {
			h.log.WarnContext(ctx, "a newer report has started: this report's absences are not applied", "report", st.Report, "newest", id)
			return Result{Superseded: true}, nil, nil
		}
		obs, _, err := h.readPart(ctx, st.Bucket, st.Absences)
		if err != nil {
			return Result{}, nil, err
		}
		return Result{Absent: len(obs), Changed: len(obs)}, h.apply(ctx, obs, nil, now), nil
	})
}

// checkWork refuses a step naming an object outside the reports bucket's
// work prefix, or a step of a function that does not fan out.
func (h *Handler) checkWork(bucket, key string) error {
	switch {
	case h.parts == nil || h.marks == nil:
		return fmt.Errorf("reports in parts are not configured (REPORTS_BUCKET)")
	case bucket != h.bucket || len(key) <= len(WorkPrefix) || key[:len(WorkPrefix)] != WorkPrefix:
		return fmt.Errorf("object s3://%s/%s is not under s3://%s/%s, where parts are", bucket, key, h.bucket, WorkPrefix)
	}
	return nil
}
