package logkey

import (
	"strings"
	"testing"

	"github.com/fleetops/fleet/shared/fault"
)

// wantInvalid fails unless err is a fault.Invalid with message msg.
func wantInvalid(t *testing.T, err error, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want invalid %q", msg)
	}
	if got := fault.KindOf(err); got != fault.KindInvalid {
		t.Errorf("kind: got %v, want %v (error %q)", got, fault.KindInvalid, err)
	}
	if got := fault.Message(err); got != msg {
		t.Errorf("message: got %q, want %q", got, msg)
	}
}

func TestParseTaskIDReadsEveryPart(t *testing.T) {
	tests := []struct {
		name string
		id   string
		want Task
	}{
		{"a plain id", "web-D1-1767225600000-0-host1-rackA",
			Task{RequestID: "web", DeployID: "D1", StartedAt: 1767225600000, InstanceNo: 0, Host: "host1", RackID: "rackA"}},
		{"a request id with dashes", "my-web-app-v2-1767225600000-12-ip_10_0_0_1-us_east_1a",
			Task{RequestID: "my-web-app", DeployID: "v2", StartedAt: 1767225600000, InstanceNo: 12, Host: "ip_10_0_0_1", RackID: "us_east_1a"}},
		{"a request id with empty dash-separated pieces", "a--b-D-1-2-h-r",
			Task{RequestID: "a--b", DeployID: "D", StartedAt: 1, InstanceNo: 2, Host: "h", RackID: "r"}},
		{"non-ASCII letters", "café-dé_1-0-0-hôte-r",
			Task{RequestID: "café", DeployID: "dé_1", Host: "hôte", RackID: "r"}},
		{"the largest start time", "r-D-9223372036854775807-0-h-k",
			Task{RequestID: "r", DeployID: "D", StartedAt: 9223372036854775807, Host: "h", RackID: "k"}},
	}
	for _, tt := range tests {
		t.Run(tt.name+" parses", func(t *testing.T) {
			tt.want.ID = tt.id
			if got := mustTask(t, tt.id); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseTaskIDRefusesMalformedIDs(t *testing.T) {
	tests := []struct{ name, id string }{
		{"an empty id", ""},
		{"too few parts", "D-1-0-h-r"},
		{"an empty request id", "-D-1-0-h-r"},
		{"an empty deploy id", "r--1-0-h-r"},
		{"an empty start time", "r-D--0-h-r"},
		{"an empty instance number", "r-D-1--h-r"},
		{"an empty host", "r-D-1-0--r"},
		{"an empty rack", "r-D-1-0-h-"},
		{"a start time that is not a number", "r-D-x1-0-h-r"},
		{"a start time with a sign", "r-D-+1-0-h-r"},
		{"a start time beyond int64", "r-D-9223372036854775808-0-h-r"},
		{"an instance number that is not a number", "r-D-1-one-h-r"},
		{"a slash", "r/x-D-1-0-h-r"},
		{"a percent sign", "r%2F-D-1-0-h-r"},
		{"two dots", "..-D-1-0-h-r"},
		{"a backslash", `r\-D-1-0-h-r`},
		{"a space", "r x-D-1-0-h-r"},
		{"a newline", "r-D-1-0-h-r\n"},
		{"an over-long id", strings.Repeat("r", 500) + "-D-1-0-h-rack"},
		{"invalid UTF-8", "r\xff-D-1-0-h-r"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			_, err := ParseTaskID(tt.id)
			wantInvalid(t, err, tt.id+" is not a valid task id")
		})
	}
}

func TestCheckIDs(t *testing.T) {
	tests := []struct {
		name            string
		id              string
		request, deploy bool // valid as a request id, as a deploy id
	}{
		{"a plain id", "web1", true, true},
		{"dots and underscores", "v1.2_3", true, true},
		{"a dash", "my-app", true, false},
		{"non-ASCII letters", "приложение", true, true},
		{"an empty id", "", false, false},
		{"a slash", "a/b", false, false},
		{"a percent sign", "a%2Fb", false, false},
		{"a token-like percent sign", "%taskId", false, false},
		{"two dots", "a..b", false, false},
		{"a backslash", `a\b`, false, false},
		{"a tab", "a\tb", false, false},
		{"a non-breaking space", "a\u00a0b", false, false},
		{"a control character", "a\x00b", false, false},
		{"512 bytes", strings.Repeat("a", 512), true, true},
		{"513 bytes", strings.Repeat("a", 513), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name+" as a request id", func(t *testing.T) {
			err := CheckRequestID(tt.id)
			if tt.request {
				if err != nil {
					t.Errorf("got %v, want no error", err)
				}
				return
			}
			wantInvalid(t, err, tt.id+" is not a valid request id")
		})
		t.Run(tt.name+" as a deploy id", func(t *testing.T) {
			err := CheckDeployID(tt.id)
			if tt.deploy {
				if err != nil {
					t.Errorf("got %v, want no error", err)
				}
				return
			}
			wantInvalid(t, err, tt.id+" is not a valid deploy id")
		})
	}
}
