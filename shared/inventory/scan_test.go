package inventory

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
)

// padded is a reader of head, n bytes of 'x' and tail, made as it is read:
// an entry of any size without holding it.
func padded(head string, n int64, tail string) io.Reader {
	return io.MultiReader(strings.NewReader(head), io.LimitReader(xs{}, n), strings.NewReader(tail))
}

type xs struct{}

func (xs) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

func ids(p parsed) (read, skipped []string) {
	for _, e := range p.entries {
		if e.err != nil {
			skipped = append(skipped, e.observation.ID)
		} else {
			read = append(read, e.observation.ID)
		}
	}
	return read, skipped
}

func TestAnEntryOverMaxValueBytesIsSkippedAndTheRestRead(t *testing.T) {
	const big = 10 << 20
	for _, tc := range []struct {
		name, key string
		body      io.Reader
		complete  bool
	}{
		{"JSON Lines, the id first", "reports/r.jsonl", padded("{\"complete\":true}\n{\"id\":\"a\"}\n{\"id\":\"huge\",\"host\":\"", big, "\"}\n{\"id\":\"b\"}\n"), true},
		{"JSON Lines, the id last, after a nested one", "reports/r.jsonl",
			padded("{\"complete\":true}\n{\"id\":\"a\"}\n{\"attributes\":{\"id\":\"inner\",\"note\":\"", big, "\"},\"id\":\"huge\"}\n{\"id\":\"b\"}"), true},
		{"JSON Lines, slaveId, with escapes in the padding", "reports/r.jsonl",
			padded("{\"complete\":true}\n{\"id\":\"a\"}\n{\"slaveId\":\"huge\",\"host\":\"\\\"}{,:[", big, "\"}\n{\"id\":\"b\"}"), true},
		{"JSON", "reports/r.json", padded(`{"machines":[{"id":"a"},{"id":"huge","resources":{"disks":[`, big, `]}},{"id":"b"}],"complete":true}`), true},
		{"JSON, with a large member it does not use", "reports/r.json",
			padded(`{"note":"`, big, `","machines":[{"id":"a"},{"id":"b"},{"id":"huge","host":"`+strings.Repeat("y", big)+`"}]}`), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := parseObject(tc.key, tc.body, 1, BoundFor(DefaultMemoryMB))
			if err != nil {
				t.Fatalf("got %v, want the report read", err)
			}
			read, skipped := ids(p)
			if strings.Join(read, ",") != "a,b" || strings.Join(skipped, ",") != "huge" {
				t.Errorf("got %v read and %v skipped, want a,b read and huge skipped", read, skipped)
			}
			if p.Complete != tc.complete {
				t.Errorf("got complete %v, want %v", p.Complete, tc.complete)
			}
		})
	}
}

func TestAnEntryOverMaxValueBytesIsNeverHeld(t *testing.T) {
	const big = 64 << 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	p, err := parseObject("reports/r.jsonl", padded("{}\n{\"host\":\"", big, "\",\"id\":\"huge\"}\n{\"id\":\"b\"}"), 1, BoundFor(DefaultMemoryMB))
	runtime.ReadMemStats(&after)
	if err != nil || len(p.entries) != 2 {
		t.Fatalf("got %d entries, %v, want 2", len(p.entries), err)
	}
	// What it holds of an entry grows to MaxValueBytes, by append's steps,
	// and is let go of there.
	if got := after.TotalAlloc - before.TotalAlloc; got > 8*MaxValueBytes {
		t.Errorf("got %d MB allocated to read an entry of %d MB, want at most %d MB", got>>20, big>>20, 8*MaxValueBytes>>20)
	}
}

func TestAnOversizedEntryThatIsNotOneRefusesTheReport(t *testing.T) {
	const big = 5 << 20
	for _, tc := range []struct {
		name string
		body io.Reader
		want string
	}{
		{"no id", padded("{}\n{\"host\":\"", big, "\"}"), "machine has no id"},
		{"an id only nested", padded("{}\n{\"attributes\":{\"id\":\"inner\"},\"host\":\"", big, "\"}"), "machine has no id"},
		{"an id that is not a string", padded("{}\n{\"id\":7,\"host\":\"", big, "\"}"), "machine has no id"},
		{"an id that is not valid", padded("{}\n{\"id\":\"#set\",\"host\":\"", big, "\"}"), "is not valid"},
		{"an id that is not valid text", padded("{}\n{\"id\":\"a\xff\",\"host\":\"", big, "\"}"), "not valid text"},
		{"a string that never ends", padded("{}\n{\"id\":\"a\",\"host\":\"", big, ""), "unexpected EOF"},
		{"brackets that do not match", padded("{}\n{\"id\":\"a\",\"host\":[\"", big, "\"}"), "unexpected '}'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseObject("reports/r.jsonl", tc.body, 1, BoundFor(DefaultMemoryMB))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want the report refused: %s", err, tc.want)
			}
		})
	}
}

func TestSpaceLongerThanMaxValueBytesRefusesTheReport(t *testing.T) {
	body := io.MultiReader(strings.NewReader("{}\n"), bytes.NewReader(bytes.Repeat([]byte(" "), MaxValueBytes+1)), strings.NewReader(`{"id":"a"}`))
	_, err := parseObject("reports/r.jsonl", body, 1, BoundFor(DefaultMemoryMB))
	var tooLarge *TooLargeError
	if !errors.As(err, &tooLarge) || tooLarge.What != "bytes of space in a row" {
		t.Errorf("got %v, want the report refused for its space", err)
	}
}

func TestTheReaderFramesWhatEncodingJSONReads(t *testing.T) {
	for _, tc := range []struct {
		name, key, body string
		want            string // the ids read, or the error
	}{
		{"JSON", "reports/r.json", `{"complete":false,"x":[1,{"y":"]"}],"machines":[{"id":"a"} , {"id":"b","n":-1.5e3}],"z":null}`, "a,b"},
		{"JSON, no machines", "reports/r.json", `{"machines":[]}`, ""},
		{"JSON Lines, values back to back", "reports/r.jsonl", `{"complete":true}{"id":"a"}` + "\r\n\t" + `{"id":"b"}`, "a,b"},
		{"JSON Lines, a header alone", "reports/r.jsonl", `{}`, ""},
		{"a trailing comma", "reports/r.json", `{"machines":[{"id":"a"},]}`, "error"},
		{"a missing comma", "reports/r.json", `{"machines":[{"id":"a"} {"id":"b"}]}`, "error"},
		{"a comma first", "reports/r.json", `{,"machines":[]}`, "error"},
		{"no colon", "reports/r.json", `{"machines" []}`, "error"},
		{"machines not a list", "reports/r.json", `{"machines":{}}`, "error"},
		{"machines twice", "reports/r.json", `{"machines":[],"machines":[]}`, "error"},
		{"more after the report", "reports/r.json", `{"machines":[]} {}`, "error"},
		{"cut short", "reports/r.json", `{"machines":[{"id":"a"}`, "error"},
		{"an entry that is a number", "reports/r.jsonl", "{}\n7", "error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := parseObject(tc.key, strings.NewReader(tc.body), 1, BoundFor(DefaultMemoryMB))
			got := "error"
			if err == nil {
				read, _ := ids(p)
				got = strings.Join(read, ",")
			}
			if got != tc.want {
				t.Errorf("got %q (%v), want %q", got, err, tc.want)
			}
		})
	}
}
