package lambdalog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/fleetops/fleet/shared/lambdalog"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestLinesAreJSONInLambdasShape(t *testing.T) {
	var buf bytes.Buffer
	log := lambdalog.New(&buf, env(nil))
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "8f5e3c1a-0000-4000-8000-000000000001"})
	log.InfoContext(ctx, "scheduled job done", "job", "expiry", "applied", 3)

	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("got %q, want one JSON line: %v", buf.String(), err)
	}
	want := map[string]any{"level": "INFO", "message": "scheduled job done", "requestId": "8f5e3c1a-0000-4000-8000-000000000001",
		"job": "expiry", "applied": 3.0}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("got %s = %v, want %v", k, line[k], v)
		}
	}
	ts, _ := line["timestamp"].(string)
	if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
		t.Errorf("got timestamp %q, want RFC 3339 (Lambda reads it for level filtering)", ts)
	}
	if strings.Count(buf.String(), "\n") != 1 {
		t.Errorf("got %q, want one line", buf.String())
	}
}

func TestALineWithoutAnInvocationHasNoRequestID(t *testing.T) {
	var buf bytes.Buffer
	lambdalog.New(&buf, env(nil)).With("function", "slaves").Info("starting")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	if _, ok := line["requestId"]; ok {
		t.Errorf("got requestId in %s, want none outside an invocation", buf.String())
	}
	if line["function"] != "slaves" {
		t.Errorf("got %s, want the logger's own attributes kept", buf.String())
	}
}

func TestTheLevelFollowsLambdasSetting(t *testing.T) {
	tests := []struct {
		setting string
		logged  []string // of debug, info, warn, error
	}{
		{"", []string{"info", "warn", "error"}},
		{"DEBUG", []string{"debug", "info", "warn", "error"}},
		{"TRACE", []string{"debug", "info", "warn", "error"}},
		{"info", []string{"info", "warn", "error"}},
		{"WARN", []string{"warn", "error"}},
		{"ERROR", []string{"error"}},
		{"FATAL", nil},
		{"LOUD", []string{"info", "warn", "error"}},
	}
	for _, tt := range tests {
		t.Run("AWS_LAMBDA_LOG_LEVEL="+tt.setting, func(t *testing.T) {
			var buf bytes.Buffer
			log := lambdalog.New(&buf, env(map[string]string{"AWS_LAMBDA_LOG_LEVEL": tt.setting}))
			log.Debug("debug")
			log.Info("info")
			log.Warn("warn")
			log.Error("error")
			var got []string
			for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				var line map[string]any
				if l != "" && json.Unmarshal([]byte(l), &line) == nil {
					got = append(got, line["message"].(string))
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.logged, ",") {
				t.Errorf("got %v logged, want %v", got, tt.logged)
			}
		})
	}
}

func TestLevelNamesEveryLambdaLevel(t *testing.T) {
	for name, want := range map[string]slog.Level{"TRACE": slog.LevelDebug - 4, "debug": slog.LevelDebug, " Info ": slog.LevelInfo,
		"WARN": slog.LevelWarn, "ERROR": slog.LevelError, "FATAL": slog.LevelError + 4, "": slog.LevelInfo} {
		if got := lambdalog.Level(name); got != want {
			t.Errorf("Level(%q): got %v, want %v", name, got, want)
		}
	}
}
