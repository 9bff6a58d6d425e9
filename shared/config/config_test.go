package config_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/config"
	"github.com/fleetops/fleet/shared/sdkconfig"
)

// env returns a getenv over the required table names plus extra; an extra
// value of "" unsets a variable.
func env(extra map[string]string) func(string) string {
	m := map[string]string{
		"SLAVES_TABLE":   "fleet-slaves",
		"HISTORY_TABLE":  "fleet-history",
		"EXPIRING_TABLE": "fleet-expiring",
		"REQUESTS_TABLE": "fleet-requests",
		"CHANGES_TABLE":  "fleet-changes",
	}
	for k, v := range extra {
		m[k] = v
	}
	return func(name string) string { return m[name] }
}

func load(t *testing.T, extra map[string]string) config.Slaves {
	t.Helper()
	c, err := config.LoadSlaves(env(extra))
	if err != nil {
		t.Fatalf("got error %v, want none", err)
	}
	return c
}

func TestLoadSlavesDefaults(t *testing.T) {
	c := load(t, nil)
	if want := (config.Tables{Slaves: "fleet-slaves", History: "fleet-history", Expiring: "fleet-expiring", Requests: "fleet-requests", Changes: "fleet-changes"}); c.Tables != want {
		t.Errorf("got tables %+v, want %+v", c.Tables, want)
	}
	checks := []struct {
		name string
		got  any
		want any
	}{
		{"MAX_DECOMMISSIONING_SLAVES defaults to 2", c.Limits.MaxDecommissioning, 2},
		{"MAX_EXPIRING_DURATION defaults to 30 days", c.Limits.MaxExpiring, 720 * time.Hour},
		{"DEAD_SLAVE_RETENTION defaults to 7 days", c.DeadSlaveRetention, 168 * time.Hour},
		{"HISTORY_RETENTION defaults to 90 days", c.HistoryRetention, 2160 * time.Hour},
		{"AUTH_MODE defaults to none", c.Policy.Mode, access.ModeNone},
		{"ADMIN_GROUPS defaults to none", len(c.Policy.AdminGroups), 0},
		{"READ_GROUPS defaults to none", len(c.Policy.ReadGroups), 0},
		{"DYNAMODB_ATTEMPT_TIMEOUT defaults to one second", c.DynamoDBAttemptTimeout, time.Second},
		{"DYNAMODB_ATTEMPT_TIMEOUT defaults to the SDK configuration's DynamoDB attempt timeout", c.DynamoDBAttemptTimeout, sdkconfig.DynamoDBAttemptTimeout},
	}
	for _, tt := range checks {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
}

func TestLoadSlavesValues(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		get  func(config.Slaves) any
		want any
	}{
		{"a count is read", map[string]string{"MAX_DECOMMISSIONING_SLAVES": "5"},
			func(c config.Slaves) any { return c.Limits.MaxDecommissioning }, 5},
		{"a zero count is allowed", map[string]string{"MAX_DECOMMISSIONING_SLAVES": "0"},
			func(c config.Slaves) any { return c.Limits.MaxDecommissioning }, 0},
		{"a count with surrounding space is read", map[string]string{"MAX_DECOMMISSIONING_SLAVES": " 3 "},
			func(c config.Slaves) any { return c.Limits.MaxDecommissioning }, 3},
		{"a duration in days is read", map[string]string{"MAX_EXPIRING_DURATION": "30d"},
			func(c config.Slaves) any { return c.Limits.MaxExpiring }, 720 * time.Hour},
		{"the local stack's DynamoDB attempt timeout is read", map[string]string{"DYNAMODB_ATTEMPT_TIMEOUT": "30s"},
			func(c config.Slaves) any { return c.DynamoDBAttemptTimeout }, 30 * time.Second},
		{"a Go duration in minutes is read", map[string]string{"DEAD_SLAVE_RETENTION": "90m"},
			func(c config.Slaves) any { return c.DeadSlaveRetention }, 90 * time.Minute},
		{"a Go duration in hours is read", map[string]string{"HISTORY_RETENTION": "48h"},
			func(c config.Slaves) any { return c.HistoryRetention }, 48 * time.Hour},
		{"a blank duration takes the default", map[string]string{"HISTORY_RETENTION": "  "},
			func(c config.Slaves) any { return c.HistoryRetention }, 2160 * time.Hour},
		{"AUTH_MODE none is read", map[string]string{"AUTH_MODE": "none"},
			func(c config.Slaves) any { return c.Policy.Mode }, access.ModeNone},
		{"AUTH_MODE authorizer is read", map[string]string{"AUTH_MODE": "authorizer"},
			func(c config.Slaves) any { return c.Policy.Mode }, access.ModeAuthorizer},
		{"ADMIN_GROUPS drops spaces and empty entries", map[string]string{"ADMIN_GROUPS": " a, b ,,c"},
			func(c config.Slaves) any { return strings.Join(c.Policy.AdminGroups, "|") }, "a|b|c"},
		{"ADMIN_GROUPS keeps a space inside a name", map[string]string{"ADMIN_GROUPS": " Helpdesk Admins ,Ops,Site  Reliability"},
			func(c config.Slaves) any { return strings.Join(c.Policy.AdminGroups, "|") }, "Helpdesk Admins|Ops|Site  Reliability"},
		{"READ_GROUPS keeps a space inside a name", map[string]string{"READ_GROUPS": "Read Only, viewers"},
			func(c config.Slaves) any { return strings.Join(c.Policy.ReadGroups, "|") }, "Read Only|viewers"},
		{"READ_GROUPS is a list too", map[string]string{"READ_GROUPS": "viewers,ops "},
			func(c config.Slaves) any { return strings.Join(c.Policy.ReadGroups, "|") }, "viewers|ops"},
		{"ADMIN_GROUPS of only commas is empty", map[string]string{"ADMIN_GROUPS": " , ,"},
			func(c config.Slaves) any { return len(c.Policy.AdminGroups) }, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.get(load(t, tt.env)); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLoadSlavesAdminGroups(t *testing.T) {
	c := load(t, map[string]string{"ADMIN_GROUPS": " a, b ,,c"})
	if want := []string{"a", "b", "c"}; !slices.Equal(c.Policy.AdminGroups, want) {
		t.Errorf("got %q, want %q", c.Policy.AdminGroups, want)
	}
}

func TestLoadSlavesInvalid(t *testing.T) {
	tests := []struct {
		name     string
		env      map[string]string
		variable string
	}{
		{"a missing slaves table is an error", map[string]string{"SLAVES_TABLE": ""}, "SLAVES_TABLE"},
		{"a blank history table is an error", map[string]string{"HISTORY_TABLE": "   "}, "HISTORY_TABLE"},
		{"a missing expiring table is an error", map[string]string{"EXPIRING_TABLE": ""}, "EXPIRING_TABLE"},
		{"a missing requests table is an error", map[string]string{"REQUESTS_TABLE": ""}, "REQUESTS_TABLE"},
		{"a negative count is an error", map[string]string{"MAX_DECOMMISSIONING_SLAVES": "-1"}, "MAX_DECOMMISSIONING_SLAVES"},
		{"a non-numeric count is an error", map[string]string{"MAX_DECOMMISSIONING_SLAVES": "two"}, "MAX_DECOMMISSIONING_SLAVES"},
		{"a word duration is an error", map[string]string{"MAX_EXPIRING_DURATION": "abc"}, "MAX_EXPIRING_DURATION"},
		{"a zero duration is an error", map[string]string{"DEAD_SLAVE_RETENTION": "0s"}, "DEAD_SLAVE_RETENTION"},
		{"zero days is an error", map[string]string{"HISTORY_RETENTION": "0d"}, "HISTORY_RETENTION"},
		{"negative days are an error", map[string]string{"MAX_EXPIRING_DURATION": "-3d"}, "MAX_EXPIRING_DURATION"},
		{"fractional days are an error", map[string]string{"MAX_EXPIRING_DURATION": "1.5d"}, "MAX_EXPIRING_DURATION"},
		{"days that overflow a duration are an error", map[string]string{"MAX_EXPIRING_DURATION": "213504d"}, "MAX_EXPIRING_DURATION"},
		{"a negative Go duration is an error", map[string]string{"HISTORY_RETENTION": "-5m"}, "HISTORY_RETENTION"},
		{"an unknown auth mode is an error", map[string]string{"AUTH_MODE": "sometimes"}, "AUTH_MODE"},
		{"an auth mode in the wrong case is an error", map[string]string{"AUTH_MODE": "Authorizer"}, "AUTH_MODE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.LoadSlaves(env(tt.env))
			if err == nil {
				t.Fatalf("got no error, want one naming %s", tt.variable)
			}
			if msg := err.Error(); !strings.Contains(msg, tt.variable) || strings.Contains(msg, "\n") {
				t.Errorf("got %q, want one line naming %s", msg, tt.variable)
			}
		})
	}
}

func TestLoadSlavesReportsTheFirstInvalidVariable(t *testing.T) {
	_, err := config.LoadSlaves(env(map[string]string{"SLAVES_TABLE": "", "AUTH_MODE": "sometimes"}))
	if err == nil || !strings.Contains(err.Error(), "SLAVES_TABLE") || strings.Contains(err.Error(), "AUTH_MODE") {
		t.Errorf("got %v, want one error naming only SLAVES_TABLE", err)
	}
}

func TestLoadLogsDefaults(t *testing.T) {
	c, err := config.LoadLogs(func(string) string { return "" })
	if err != nil {
		t.Fatalf("got error %v, want none", err)
	}
	if len(c.Buckets) != 0 || c.Format.String() != "%requestId/%Y/%m/%taskId_%index-%s-%filename" ||
		c.URLTTL != time.Hour || c.Lookback != 30*24*time.Hour || c.ListTimeout != 5*time.Second ||
		c.LinkTimeout != 2*time.Second || c.Policy.Mode != access.ModeNone {
		t.Errorf("got %+v, want the documented defaults and no bucket", c)
	}
}

func TestLoadLogsValues(t *testing.T) {
	c, err := config.LoadLogs(func(name string) string {
		return map[string]string{
			"LOG_BUCKETS": "task-logs, task-logs.eu-west-1 ", "LOG_KEY_FORMAT": "%requestId/%taskId/%filename",
			"LOG_URL_TTL": "12h", "LOG_LOOKBACK": "7d", "LOG_LIST_TIMEOUT": "3s", "LOG_LINK_TIMEOUT": "500ms",
			"AUTH_MODE": "authorizer", "READ_GROUPS": "ops",
		}[name]
	})
	if err != nil {
		t.Fatalf("got error %v, want none", err)
	}
	if !slices.Equal(c.Buckets, []string{"task-logs", "task-logs.eu-west-1"}) || c.Format.String() != "%requestId/%taskId/%filename" ||
		c.URLTTL != 12*time.Hour || c.Lookback != 7*24*time.Hour || c.ListTimeout != 3*time.Second ||
		c.LinkTimeout != 500*time.Millisecond || c.Policy.Mode != access.ModeAuthorizer ||
		!slices.Equal(c.Policy.ReadGroups, []string{"ops"}) {
		t.Errorf("got %+v", c)
	}
}

func TestLoadLogsInvalid(t *testing.T) {
	tests := []struct {
		name, variable, value string
	}{
		{"an upper-case bucket name is an error", "LOG_BUCKETS", "Task-Logs"},
		{"a bucket name with a slash is an error", "LOG_BUCKETS", "task-logs/other"},
		{"a bucket named twice is an error", "LOG_BUCKETS", "task-logs,task-logs"},
		{"an unknown key token is an error", "LOG_KEY_FORMAT", "%requestId/%bogus"},
		{"a URL lifetime over 12 hours is an error", "LOG_URL_TTL", "13h"},
		{"a zero list timeout is an error", "LOG_LIST_TIMEOUT", "0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.LoadLogs(func(name string) string {
				if name == tt.variable {
					return tt.value
				}
				return ""
			})
			if err == nil || !strings.Contains(err.Error(), tt.variable) || strings.Contains(err.Error(), "\n") {
				t.Errorf("got %v, want one line naming %s", err, tt.variable)
			}
		})
	}
}

func TestLoadS3(t *testing.T) {
	tests := []struct {
		value   string
		want    bool
		wantErr bool
	}{{"", false, false}, {"true", true, false}, {"false", false, false}, {"yes", false, true}}
	for _, tt := range tests {
		t.Run("S3_FORCE_PATH_STYLE="+tt.value, func(t *testing.T) {
			c, err := config.LoadS3(env(map[string]string{"S3_FORCE_PATH_STYLE": tt.value}))
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), "S3_FORCE_PATH_STYLE") {
					t.Errorf("got %v, want an error naming S3_FORCE_PATH_STYLE", err)
				}
				return
			}
			if err != nil || c.PathStyle != tt.want {
				t.Errorf("got (%+v, %v), want path style %v", c, err, tt.want)
			}
		})
	}
}

func TestLoadReports(t *testing.T) {
	c, err := config.LoadReports(env(map[string]string{"REPORTS_BUCKET": " fleet-reportsbucket-1 ", "S3_FORCE_PATH_STYLE": "true"}))
	if err != nil || c.Bucket != "fleet-reportsbucket-1" || !c.S3.PathStyle {
		t.Errorf("got (%+v, %v), want the bucket trimmed and path style", c, err)
	}
	if c, err := config.LoadReports(env(nil)); err != nil || c.Bucket != "" || c.PartSize != config.DefaultPartSize {
		t.Errorf("got (%+v, %v), want no bucket (reports come only inline) and the default part size", c, err)
	}
	for _, v := range []string{"0", "-1", "many"} {
		if _, err := config.LoadReports(env(map[string]string{"REPORT_PART_SIZE": v})); err == nil || !strings.Contains(err.Error(), "REPORT_PART_SIZE") {
			t.Errorf("REPORT_PART_SIZE=%s: got %v, want an error naming it", v, err)
		}
	}
	if _, err := config.LoadReports(env(map[string]string{"S3_FORCE_PATH_STYLE": "yes"})); err == nil || !strings.Contains(err.Error(), "S3_FORCE_PATH_STYLE") {
		t.Errorf("got %v, want an error naming S3_FORCE_PATH_STYLE", err)
	}
}

func TestTheLogIndexIsOffUnlessTurnedOnWithItsTable(t *testing.T) {
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	if c, err := config.LoadLogIndex(env(nil)); err != nil || c.On {
		t.Errorf("unset: got %+v, %v, want off", c, err)
	}
	if c, err := config.LoadLogIndex(env(map[string]string{"LOG_INDEX": "true", "LOG_INDEX_TABLE": "idx"})); err != nil || !c.On || c.Table != "idx" {
		t.Errorf("on: got %+v, %v, want on over idx", c, err)
	}
	for _, vars := range []map[string]string{{"LOG_INDEX": "true"}, {"LOG_INDEX": "on", "LOG_INDEX_TABLE": "idx"}} {
		if c, err := config.LoadLogIndex(env(vars)); err == nil {
			t.Errorf("%v: got %+v, want an error", vars, c)
		}
	}
	if c, err := config.LoadIndexer(env(map[string]string{"LOG_BUCKETS": "task-logs"})); err == nil {
		t.Errorf("indexer without LOG_INDEX_TABLE: got %+v, want an error", c)
	}
}
