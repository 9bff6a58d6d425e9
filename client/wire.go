package client

// The wire types of openapi.yaml, by hand: the document is small and
// stable, and a generator's output (pointer-heavy, oneOf unions as raw
// JSON) would read worse than these. TestWireTypesMatchOpenAPI fails when a
// field here and a property there disagree.

// State is a machine state (openapi.yaml MachineState).
type State string

// The machine states, in declaration order.
const (
	MissingOnStartup     State = "MISSING_ON_STARTUP"
	Active               State = "ACTIVE"
	StartingDecommission State = "STARTING_DECOMMISSION"
	Decommissioning      State = "DECOMMISSIONING"
	Decommissioned       State = "DECOMMISSIONED"
	Dead                 State = "DEAD"
	Frozen               State = "FROZEN"
)

// States lists every state, in declaration order.
var States = []State{MissingOnStartup, Active, StartingDecommission, Decommissioning, Decommissioned, Dead, Frozen}

// StateUpdate is one state change of a slave (SchedulerMachineStateHistoryUpdate).
type StateUpdate struct {
	ObjectID  string `json:"objectId"`
	State     State  `json:"state"`
	Timestamp int64  `json:"timestamp"` // epoch ms
	User      string `json:"user,omitempty"`
	Message   string `json:"message,omitempty"`
}

// Slave is a worker machine (SchedulerSlave).
type Slave struct {
	ID           string            `json:"id"`
	FirstSeenAt  int64             `json:"firstSeenAt"` // epoch ms
	CurrentState StateUpdate       `json:"currentState"`
	Host         string            `json:"host"`
	RackID       string            `json:"rackId"`
	Attributes   map[string]string `json:"attributes"`
	Resources    map[string]any    `json:"resources,omitempty"`
	// RunningTasks is the running-task count of the last report, present
	// only while the slave drains (STARTING_DECOMMISSION, DECOMMISSIONING).
	RunningTasks *int `json:"runningTasks,omitempty"`
	// Sequence is the position of the slave's latest change in the feed:
	// send it back (ChangeOptions.IfMatch) to change the slave only if it
	// has not moved since.
	Sequence int64 `json:"sequence"`
}

// ChangeRequest is the optional body of freeze, decommission and activate
// (SchedulerMachineChangeRequest). DurationMillis and RevertToState make the
// change expire.
type ChangeRequest struct {
	Message                        string `json:"message,omitempty"`
	DurationMillis                 int64  `json:"durationMillis,omitempty"`
	RevertToState                  State  `json:"revertToState,omitempty"`
	ActionID                       string `json:"actionId,omitempty"`
	KillTasksOnDecommissionTimeout bool   `json:"killTasksOnDecommissionTimeout,omitempty"`
}

// ExpiringRequest is the change request an expiring record holds
// (ExpiringMachineChangeRequest).
type ExpiringRequest struct {
	Message                        string `json:"message,omitempty"`
	DurationMillis                 int64  `json:"durationMillis"`
	RevertToState                  State  `json:"revertToState"`
	ActionID                       string `json:"actionId,omitempty"`
	KillTasksOnDecommissionTimeout bool   `json:"killTasksOnDecommissionTimeout"`
}

// Expiring is a pending revert of a slave's state (SchedulerExpiringMachineState).
type Expiring struct {
	MachineID                      string          `json:"machineId"`
	User                           string          `json:"user,omitempty"`
	StartMillis                    int64           `json:"startMillis"`
	ActionID                       string          `json:"actionId"`
	RevertToState                  State           `json:"revertToState"`
	KillTasksOnDecommissionTimeout bool            `json:"killTasksOnDecommissionTimeout"`
	Request                        ExpiringRequest `json:"expiringAPIRequestObject"`
}

// DueAt is when the record reverts the slave, in epoch ms.
func (e Expiring) DueAt() int64 { return e.StartMillis + e.Request.DurationMillis }

// User names the acting user with AUTH_MODE none (SchedulerUser); behind an
// authorizer the service ignores it.
type User struct {
	ID            string   `json:"id,omitempty"`
	Name          string   `json:"name,omitempty"`
	Email         string   `json:"email,omitempty"`
	Groups        []string `json:"groups,omitempty"`
	Authenticated bool     `json:"authenticated,omitempty"`
}

// Log is one task log (SchedulerStorageLog, or SchedulerStorageLogMetadata
// when the lookup asked for no links: GetURL and DownloadURL are then
// empty). StartTime and EndTime are 0 when absent.
type Log struct {
	Key          string `json:"key"`
	LastModified int64  `json:"lastModified"` // epoch ms
	Size         int64  `json:"size"`         // bytes
	StartTime    int64  `json:"startTime,omitempty"`
	EndTime      int64  `json:"endTime,omitempty"`
	GetURL       string `json:"getUrl,omitempty"`
	DownloadURL  string `json:"downloadUrl,omitempty"`
}

// ContinuationToken says where the next page of one searched prefix starts.
type ContinuationToken struct {
	Value    string `json:"value,omitempty"`
	LastPage bool   `json:"lastPage"`
}

// SearchRequest is the body of a log search (SchedulerStorageSearchRequest).
// Start and End are epoch ms, 0 for none.
type SearchRequest struct {
	RequestsAndDeploys      map[string][]string          `json:"requestsAndDeploys,omitempty"`
	TaskIDs                 []string                     `json:"taskIds,omitempty"`
	FileNamePrefixAllowlist []string                     `json:"fileNamePrefixAllowlist,omitempty"`
	FileNamePrefixWhitelist []string                     `json:"fileNamePrefixWhitelist,omitempty"` // deprecated: FileNamePrefixAllowlist
	Start                   int64                        `json:"start,omitempty"`
	End                     int64                        `json:"end,omitempty"`
	ExcludeMetadata         bool                         `json:"excludeMetadata,omitempty"`
	ListOnly                bool                         `json:"listOnly,omitempty"`
	MaxPerPage              int                          `json:"maxPerPage,omitempty"`
	ContinuationTokens      map[string]ContinuationToken `json:"continuationTokens,omitempty"`
}

// SearchResult is one page of a log search (SchedulerStorageSearchResult).
type SearchResult struct {
	ContinuationTokens map[string]ContinuationToken `json:"continuationTokens"`
	LastPage           bool                         `json:"lastPage"`
	Results            []Log                        `json:"results"`
}

// errorBody is every error answer (Error).
type errorBody struct {
	Code     int    `json:"code"`
	Message  string `json:"message"`
	Sequence *int64 `json:"sequence,omitempty"`
	State    State  `json:"state,omitempty"`
}

// ImportRequest is the body of an import (ImportRequest).
type ImportRequest struct {
	Slaves []ImportedSlave `json:"slaves"`
}

// ImportedSlave is one slave of an import, as the old API describes it
// (ImportedSlave): its record, its history oldest first, whose last entry
// is the record's current state, and its expiring change, if any. The
// record's Sequence is ignored.
type ImportedSlave struct {
	Slave    Slave         `json:"slave"`
	History  []StateUpdate `json:"history"`
	Expiring *Expiring     `json:"expiring,omitempty"`
}

// ImportAnswer is an import's answer (ImportAnswer).
type ImportAnswer struct {
	Results []ImportResult `json:"results"`
}

// ImportResult is what an import did with one slave (ImportResult):
// Result is imported, unchanged, conflict or refused, with the Reason of
// the last two.
type ImportResult struct {
	ID     string `json:"id"`
	Result string `json:"result"`
	Reason string `json:"reason,omitempty"`
}
