package client

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// spec is the part of openapi.yaml these tests read.
type spec struct {
	Paths      map[string]map[string]yaml.Node `yaml:"paths"` // path → method (or "parameters") → operation
	Components struct {
		Schemas map[string]struct {
			Required   []string       `yaml:"required"`
			Properties map[string]any `yaml:"properties"`
		} `yaml:"schemas"`
	} `yaml:"components"`
}

func loadSpec(t *testing.T) spec {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var s spec
	if err := yaml.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// methods maps every operationId of openapi.yaml to the Client method that
// sends it.
var methods = map[string]string{
	"listSlaves":              "ListSlaves",
	"listSlavesTrailingSlash": "ListSlaves", // the same route, GET /api/slaves/
	"listExpiring":            "ListExpiring",
	"followChanges":           "FollowChanges",
	"deleteDeadSlaves":        "DeleteDeadSlaves",
	"getSlave":                "GetSlave",
	"getSlaveHistory":         "GetSlaveHistory",
	"deleteSlave":             "DeleteSlave",
	"freezeSlave":             "FreezeSlave",
	"decommissionSlave":       "DecommissionSlave",
	"activateSlave":           "ActivateSlave",
	"deleteExpiring":          "DeleteExpiring",
	"importSlaves":            "Import",
	"getTaskLogs":             "GetTaskLogs",
	"getRequestLogs":          "GetRequestLogs",
	"getDeployLogs":           "GetDeployLogs",
	"searchLogs":              "SearchLogs",
}

func TestEveryOperationHasAClientMethod(t *testing.T) {
	s := loadSpec(t)
	var ops []string
	for path, item := range s.Paths {
		for method, node := range item {
			if method == "parameters" || method == "summary" || method == "description" {
				continue
			}
			var op struct {
				OperationID string `yaml:"operationId"`
			}
			if err := node.Decode(&op); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			if op.OperationID == "" {
				t.Errorf("%s %s has no operationId", strings.ToUpper(method), path)
				continue
			}
			ops = append(ops, op.OperationID)
			name, ok := methods[op.OperationID]
			if !ok {
				t.Errorf("operation %s (%s %s) of openapi.yaml has no client method", op.OperationID, strings.ToUpper(method), path)
				continue
			}
			if _, ok := reflect.TypeFor[*Client]().MethodByName(name); !ok {
				t.Errorf("operation %s: got no method Client.%s", op.OperationID, name)
			}
		}
	}
	for op := range methods {
		if !slices.Contains(ops, op) {
			t.Errorf("the client sends %s, which openapi.yaml does not describe", op)
		}
	}
}

// TestWireTypesMatchOpenAPI checks each wire type against its schema: the
// same property names, and a field without omitempty exactly where the
// schema requires the property (the answers are checked against the
// schemas by the integration tests; this catches a field the client lacks
// or misspells).
func TestWireTypesMatchOpenAPI(t *testing.T) {
	s := loadSpec(t)
	types := map[string]reflect.Type{
		"Error":                              reflect.TypeFor[errorBody](),
		"SchedulerMachineStateHistoryUpdate": reflect.TypeFor[StateUpdate](),
		"SchedulerSlave":                     reflect.TypeFor[Slave](),
		"Changes":                            reflect.TypeFor[Changes](),
		"SlaveChange":                        reflect.TypeFor[SlaveChange](),
		"Bookmark":                           reflect.TypeFor[Bookmark](),
		"StreamError":                        reflect.TypeFor[StreamError](),
		"SchedulerMachineChangeRequest":      reflect.TypeFor[ChangeRequest](),
		"ExpiringMachineChangeRequest":       reflect.TypeFor[ExpiringRequest](),
		"SchedulerExpiringMachineState":      reflect.TypeFor[Expiring](),
		"SchedulerUser":                      reflect.TypeFor[User](),
		"SchedulerStorageLog":                reflect.TypeFor[Log](),
		"ContinuationToken":                  reflect.TypeFor[ContinuationToken](),
		"SchedulerStorageSearchRequest":      reflect.TypeFor[SearchRequest](),
		"SchedulerStorageSearchResult":       reflect.TypeFor[SearchResult](),
		"ImportRequest":                      reflect.TypeFor[ImportRequest](),
		"ImportedSlave":                      reflect.TypeFor[ImportedSlave](),
		"ImportAnswer":                       reflect.TypeFor[ImportAnswer](),
		"ImportResult":                       reflect.TypeFor[ImportResult](),
	}
	for name, schema := range s.Components.Schemas {
		typ, ok := types[name]
		if !ok {
			switch name {
			case "MachineState", "SchedulerStorageLogMetadata", "SchedulerStorageLogEntry", "StreamLine":
				continue // State; Log without its links; the union of the two; a stream's line, one of three
			}
			t.Errorf("schema %s has no wire type", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			fields := map[string]bool{} // json name → omitempty
			for f := range typ.Fields() {
				tag, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
				fields[tag] = strings.Contains(opts, "omitempty")
			}
			for prop := range schema.Properties {
				omit, ok := fields[prop]
				if !ok {
					t.Errorf("property %s has no field in %s", prop, typ)
					continue
				}
				// Request bodies may send false or 0 as absent; Log
				// is also SchedulerStorageLogMetadata, without links.
				required := slices.Contains(schema.Required, prop)
				union := name == "SchedulerStorageLog" && (prop == "getUrl" || prop == "downloadUrl")
				if required && omit && !strings.HasSuffix(name, "Request") && !union {
					t.Errorf("required property %s: field of %s has omitempty", prop, typ)
				}
				if !required && !omit {
					t.Errorf("optional property %s: field of %s lacks omitempty, so it would be written when absent", prop, typ)
				}
			}
			for field := range fields {
				if _, ok := schema.Properties[field]; !ok {
					t.Errorf("field %s of %s is no property of %s", field, typ, name)
				}
			}
		})
	}
	for field := range s.Components.Schemas["SchedulerStorageLogMetadata"].Properties {
		if _, ok := s.Components.Schemas["SchedulerStorageLog"].Properties[field]; !ok {
			t.Errorf("SchedulerStorageLogMetadata's %s is not in SchedulerStorageLog, which Log follows", field)
		}
	}
}
