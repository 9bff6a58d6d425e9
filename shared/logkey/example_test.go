package logkey_test

import (
	"fmt"
	"time"

	"github.com/fleetops/fleet/shared/logkey"
)

func ExampleFormat_Prefixes() {
	f, _ := logkey.ParseFormat(logkey.DefaultFormat)
	task, _ := logkey.ParseTaskID("web-D1-1769900400000-0-host1-rack1") // started 2026-01-31T23:00Z
	now := time.Date(2026, 2, 10, 0, 0, 0, 0, time.UTC).UnixMilli()

	prefixes, _ := f.Prefixes(logkey.TaskScope(task), logkey.TaskWindow(task, nil, nil, now), logkey.MaxPrefixes)
	fmt.Println(prefixes)
	prefixes, _ = f.Prefixes(logkey.DeployScope("web", "D1"), logkey.LookbackWindow(nil, nil, 7*24*time.Hour, now), logkey.MaxPrefixes)
	fmt.Println(prefixes)
	prefixes, _ = f.Prefixes(logkey.RequestScope("web"), logkey.LookbackWindow(nil, nil, 30*24*time.Hour, now), logkey.MaxPrefixes)
	fmt.Println(prefixes)
	fmt.Println(f.Key(logkey.File{Task: task, Filename: "service.log", Index: 3, Modified: time.UnixMilli(task.StartedAt).Add(2 * time.Hour)}))
	// Output:
	// [web/2026/01/web-D1-1769900400000-0-host1-rack1_ web/2026/02/web-D1-1769900400000-0-host1-rack1_]
	// [web/2026/02/web-D1-]
	// [web/2026/01/web- web/2026/02/web-]
	// web/2026/02/web-D1-1769900400000-0-host1-rack1_3-1769907600000-service.log
}
