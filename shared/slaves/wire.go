package slaves

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/machine"
)

// The JSON models of openapi.yaml. Optional fields are omitted, never null.

type updateJSON struct {
	ObjectID  string `json:"objectId"`
	State     string `json:"state"`
	Timestamp int64  `json:"timestamp"`
	User      string `json:"user,omitempty"`
	Message   string `json:"message,omitempty"`
}

type slaveJSON struct {
	ID           string            `json:"id"`
	FirstSeenAt  int64             `json:"firstSeenAt"`
	CurrentState updateJSON        `json:"currentState"`
	Host         string            `json:"host"`
	RackID       string            `json:"rackId"`
	Attributes   map[string]string `json:"attributes"`
	Resources    json.RawMessage   `json:"resources,omitempty"`
	RunningTasks *int              `json:"runningTasks,omitempty"`
	Sequence     int64             `json:"sequence"`
}

type changeRequestJSON struct {
	Message                        *string `json:"message,omitempty"`
	DurationMillis                 *int64  `json:"durationMillis,omitempty"`
	RevertToState                  *string `json:"revertToState,omitempty"`
	ActionID                       *string `json:"actionId,omitempty"`
	KillTasksOnDecommissionTimeout bool    `json:"killTasksOnDecommissionTimeout"`
}

type expiringJSON struct {
	MachineID                      string            `json:"machineId"`
	User                           string            `json:"user,omitempty"`
	StartMillis                    int64             `json:"startMillis"`
	ActionID                       string            `json:"actionId"`
	RevertToState                  string            `json:"revertToState"`
	KillTasksOnDecommissionTimeout bool              `json:"killTasksOnDecommissionTimeout"`
	ExpiringAPIRequestObject       changeRequestJSON `json:"expiringAPIRequestObject"`
}

func toUpdateJSON(u machine.Update) updateJSON {
	return updateJSON{ObjectID: u.SlaveID, State: string(u.State), Timestamp: u.Timestamp, User: u.User, Message: u.Message}
}

func toSlaveJSON(s machine.Slave) slaveJSON {
	attrs := s.Attributes
	if attrs == nil {
		attrs = map[string]string{}
	}
	return slaveJSON{
		ID:           s.ID,
		FirstSeenAt:  s.FirstSeenAt,
		CurrentState: toUpdateJSON(s.Current),
		Host:         s.Host,
		RackID:       s.RackID,
		Attributes:   attrs,
		Resources:    s.Resources,
		RunningTasks: s.RunningTasks,
		Sequence:     s.Sequence,
	}
}

func toExpiringJSON(e machine.Expiring) expiringJSON {
	req := e.Request
	out := expiringJSON{
		MachineID:                      e.MachineID,
		User:                           e.User,
		StartMillis:                    e.StartMillis,
		ActionID:                       e.ActionID,
		RevertToState:                  string(e.RevertTo),
		KillTasksOnDecommissionTimeout: e.KillTasksOnDecommissionTimeout,
		ExpiringAPIRequestObject: changeRequestJSON{
			DurationMillis:                 req.DurationMillis,
			KillTasksOnDecommissionTimeout: req.KillTasksOnDecommissionTimeout,
		},
	}
	if req.Message != "" {
		out.ExpiringAPIRequestObject.Message = &req.Message
	}
	if req.RevertToState != nil {
		s := string(*req.RevertToState)
		out.ExpiringAPIRequestObject.RevertToState = &s
	}
	if req.ActionID != "" {
		out.ExpiringAPIRequestObject.ActionID = &req.ActionID
	}
	return out
}

// MaxMessage is the most characters (runes) a change request's message
// may have. The message goes into the history entry and the expiring
// record, and is answered by the history and expiring lists: the bound
// keeps one entry within a known size, whatever its characters.
const MaxMessage = 4096

// MaxActionID bounds a change request's actionId, stored twice on the
// expiring record, as the Idempotency-Key header is bounded.
const MaxActionID = 255

// changeRequest validates the wire request: revertToState must name a state
// exactly, as in every JSON body, and the message must be at most
// MaxMessage characters.
func (c changeRequestJSON) changeRequest() (machine.ChangeRequest, error) {
	req := machine.ChangeRequest{DurationMillis: c.DurationMillis, KillTasksOnDecommissionTimeout: c.KillTasksOnDecommissionTimeout}
	if c.Message != nil {
		if utf8.RuneCountInString(*c.Message) > MaxMessage {
			return req, fault.Invalid("message must be at most %d characters", MaxMessage)
		}
		req.Message = *c.Message
	}
	if c.ActionID != nil {
		if utf8.RuneCountInString(*c.ActionID) > MaxActionID {
			return req, fault.Invalid("actionId must be at most %d characters", MaxActionID)
		}
		req.ActionID = *c.ActionID
	}
	if c.RevertToState != nil {
		st := machine.State(*c.RevertToState)
		if !st.Valid() {
			return req, fault.Invalid("revertToState must be one of %s", machine.Names())
		}
		req.RevertToState = &st
	}
	return req, nil
}
