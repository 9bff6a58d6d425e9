package inventory_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fleetops/fleet/shared/inventory"
	"github.com/fleetops/fleet/shared/machine"
)

// textCases are machine entries as a broken scheduler sends them, and what
// becomes of each: refused is the whole report refused; otherwise invalid
// entries are skipped and host is what the stored machine T1 holds.
var textCases = []struct {
	name, entry string
	refused     bool
	invalid     int
	host        string
}{
	{name: "bytes that are not UTF-8 in a host", entry: "{\"id\":\"T1\",\"host\":\"bad-\xff\xfe-host.example.com\"}", invalid: 1},
	{name: "an unpaired surrogate in a host", entry: `{"id":"T1","host":"bad-\ud800-host.example.com"}`, invalid: 1},
	{name: "bytes that are not UTF-8 in an attribute's name", entry: "{\"id\":\"T1\",\"host\":\"h\",\"attributes\":{\"zo\xffne\":\"a\"}}", invalid: 1},
	{name: "bytes that are not UTF-8 in a field the service does not read", entry: "{\"id\":\"T1\",\"host\":\"h\",\"note\":\"\xc3\"}", invalid: 1},
	{name: "bytes that are not UTF-8 in an id", entry: "{\"id\":\"bad-\xff\xfe\",\"host\":\"h\"}", refused: true},
	{name: "an unpaired surrogate in an id", entry: `{"id":"bad-\udc00","host":"h"}`, refused: true},
	{name: "bytes that are not UTF-8 in a slaveId", entry: "{\"slaveId\":\"bad-\xff\",\"host\":\"h\"}", refused: true},
	{name: "bytes that are not UTF-8 in an id whose entry is otherwise unreadable", entry: "{\"id\":\"bad-\xff\",\"resources\":[1]}", refused: true},
	{name: "a U+FFFD the sender wrote in a host", entry: "{\"id\":\"T1\",\"host\":\"bad-\xef\xbf\xbd-host\"}", host: "bad-\uFFFD-host"},
	{name: "a U+FFFD the sender escaped in a host", entry: `{"id":"T1","host":"bad-\ufffd-host"}`, host: "bad-\uFFFD-host"},
	{name: "an escaped surrogate pair in a host", entry: `{"id":"T1","host":"\ud83d\ude00"}`, host: "😀"},
}

func TestReportTextThatIsNotValidIsNeverStoredReplaced(t *testing.T) {
	for _, form := range []struct {
		name string
		wrap func(entries string) string
	}{
		{"inline event", func(e string) string {
			return `{"detail-type":"Machine Report","time":"2026-11-26T10:00:00Z","detail":{"machines":[` + e + `]}}`
		}},
		{"direct invocation", func(e string) string { return `{"machines":[` + e + `]}` }},
		{"plan step of a direct invocation", func(e string) string { return `{"step":"plan","event":{"machines":[` + e + `]}}` }},
	} {
		for _, tc := range textCases {
			t.Run(form.name+", "+tc.name, func(t *testing.T) {
				f := newFleet()
				before := contents(t, f)
				good := `{"id":"T2","host":"t2.example.com"}`
				h := inventory.New(f, machine.DefaultLossBrake, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
				res, err := h.Handle(context.Background(), json.RawMessage(form.wrap(tc.entry+","+good)))
				after := contents(t, f)
				if tc.refused {
					if err == nil || !strings.Contains(err.Error(), "not valid text") {
						t.Errorf("got %+v, %v, want the report refused for its id", res, err)
					}
					if diff := changes(before, after); len(diff) > 0 {
						t.Errorf("got %v changed, want nothing", diff)
					}
					return
				}
				if err != nil || res.Invalid != tc.invalid {
					t.Fatalf("got %+v, %v, want %d invalid entries", res, err, tc.invalid)
				}
				if _, ok := after.Slaves["T2"]; !ok {
					t.Errorf("got no T2, want the rest of the report applied")
				}
				t1, stored := after.Slaves["T1"]
				if tc.invalid > 0 && stored {
					t.Errorf("got T1 stored with host %q, want the entry skipped", t1.Host)
				}
				if tc.invalid == 0 && t1.Host != tc.host {
					t.Errorf("got T1 with host %q, want %q", t1.Host, tc.host)
				}
				for id, s := range after.Slaves {
					if strings.ContainsRune(id+s.Host+s.RackID, utf8.RuneError) && tc.host == "" {
						t.Errorf("got %s stored with host %q: a U+FFFD the sender did not send", id, s.Host)
					}
				}
			})
		}
	}
}
