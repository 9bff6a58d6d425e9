//go:build integration

package inventory_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/inventory"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/metrics"
	"github.com/fleetops/fleet/shared/reportstore"
)

// TestAReportObjectWithInvalidTextIsNeverStoredReplaced sends, through the
// reports bucket, the objects a broken scheduler wrote: bytes \xff\xfe in
// a host skip that entry, counted; the same bytes in an id refuse the
// report whole.
func TestAReportObjectWithInvalidTextIsNeverStoredReplaced(t *testing.T) {
	good := `{"id":"s3f-good","host":"good.example.com"}`
	for _, tc := range []struct {
		name, key, body string
		refused         bool
	}{
		{"\\xff\\xfe in a host", "reports/bad-host.json", "{\"machines\":[{\"id\":\"s3f-bad-host\",\"host\":\"bad-\xff\xfe-host.example.com\"}," + good + "]}", false},
		{"\\xff\\xfe in a host, JSON Lines, gzip", "reports/bad-host.jsonl.gz", "{}\n{\"id\":\"s3f-bad-host\",\"host\":\"bad-\xff\xfe-host.example.com\"}\n" + good + "\n", false},
		{"invalid bytes in an id", "reports/bad-id.json", "{\"machines\":[{\"id\":\"s3f-bad-\xff\xfe\",\"host\":\"h\"}," + good + "]}", true},
		{"invalid bytes in an id, JSON Lines", "reports/bad-id.jsonl", "{}\n" + good + "\n{\"id\":\"s3f-bad-\xc0\",\"host\":\"h\"}\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, h := emptyFleet(t)
			upload(t, tc.key, []byte(tc.body), strings.HasSuffix(tc.key, ".gz"))
			res, err := h.Handle(t.Context(), objectEvent(time.Now(), local.ReportsBucket, tc.key))
			got := states(t, store)
			if tc.refused {
				if err == nil || !strings.Contains(err.Error(), "not valid text") || len(got) != 0 {
					t.Errorf("got %+v, %v and %v stored, want the report refused for its id and nothing stored", res, err, got)
				}
				return
			}
			if err != nil || res.Invalid != 1 || res.Changed != 1 {
				t.Fatalf("got %+v, %v, want the bad entry skipped and counted, the good one applied", res, err)
			}
			if len(got) != 1 || got["s3f-good"] != machine.Active {
				t.Errorf("got %v, want s3f-good alone", got)
			}
		})
	}
}

// gzipRepeated is a gzip object of head, then body repeated to about size
// bytes, then tail: each part a gzip member of its own, the repeated one
// compressed once, so that a gigabyte is built in a second.
func gzipRepeated(t *testing.T, head, body, tail string, size int) []byte {
	t.Helper()
	member := func(s string) []byte {
		var buf bytes.Buffer
		z, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		z.Write([]byte(s))
		z.Close()
		return buf.Bytes()
	}
	chunk := strings.Repeat(body, max(1, (16<<20)/len(body)))
	repeated := member(chunk)
	var out bytes.Buffer
	out.Write(member(head))
	for n := 0; n < size; n += len(chunk) {
		out.Write(repeated)
	}
	out.Write(member(tail))
	return out.Bytes()
}

// TestAReportObjectThatExpandsPastItsBoundIsRefusedQuickly sends the
// decompression bombs of a broken or hostile writer: a megabyte of gzip
// that is a gigabyte of whitespace, and one valid line repeated to a
// gigabyte. Each is refused as soon as it passes the bound of a function of
// 512 MB, with its reason, a log line and the ReportsTooLarge metric, and
// changes nothing.
func TestAReportObjectThatExpandsPastItsBoundIsRefusedQuickly(t *testing.T) {
	bound := inventory.BoundFor(inventory.DefaultMemoryMB)
	line := `{"id":"s3f-one","host":"one.example.com","rackId":"r1","resources":{"cpus":4}}` + "\n"
	for _, tc := range []struct {
		name, key string
		object    func(t *testing.T) []byte
		what      string
	}{
		{"1 GB of whitespace", "reports/bomb-space.json.gz", func(t *testing.T) []byte {
			return gzipRepeated(t, `{"complete":true,"machines":[`, strings.Repeat(" ", 4096), "]}", 1<<30)
		}, "bytes of space in a row"},
		{"1 GB of whitespace in one entry", "reports/bomb-entry.json.gz", func(t *testing.T) []byte {
			return gzipRepeated(t, `{"machines":[{"id":"s3f-one",`, strings.Repeat(" ", 4096), `"host":"h"}]}`, 1<<30)
		}, "bytes decompressed"},
		{"entries padded with whitespace to 1 GB", "reports/bomb-padded.json.gz", func(t *testing.T) []byte {
			return gzipRepeated(t, `{"machines":[`, `{"id":"s3f-one"},`+strings.Repeat(" ", 1<<20), `{"id":"s3f-last"}]}`, 1<<30)
		}, "bytes decompressed"},
		{"one valid line repeated to 1 GB", "reports/bomb-lines.jsonl.gz", func(t *testing.T) []byte {
			return gzipRepeated(t, "{\"complete\":true}\n", line, "", 1<<30)
		}, "machine entries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, _ := emptyFleet(t)
			var logs, out bytes.Buffer
			m, _ := metrics.New(&out, "Fleet", "fleet-InventoryFunction-1")
			h := inventory.New(store, machine.DefaultLossBrake, slog.New(slog.NewJSONHandler(&logs, nil)), m).
				ReadsFrom(local.ReportsBucket, reportstore.New(local.S3))
			object := tc.object(t)
			upload(t, tc.key, object, false)
			start := time.Now()
			_, err := h.Handle(t.Context(), objectEvent(time.Now(), local.ReportsBucket, tc.key))
			t.Logf("%d bytes of gzip refused in %v: %v", len(object), time.Since(start).Round(time.Millisecond), err)
			var tooLarge *inventory.TooLargeError
			if !errors.As(err, &tooLarge) || tooLarge.What != tc.what || tooLarge.Key != tc.key || tooLarge.Bound != bound {
				t.Fatalf("got %v, want %s refused for its %s over %+v", err, tc.key, tc.what, bound)
			}
			if got := states(t, store); len(got) != 0 {
				t.Errorf("got %v, want nothing stored", got)
			}
			if !strings.Contains(logs.String(), "machine report refused: larger than the function reads") || !strings.Contains(logs.String(), tc.key) {
				t.Errorf("got logs %s, want the refusal logged with the object", logs.String())
			}
			if !strings.Contains(out.String(), fmt.Sprintf(`"%s":1`, metrics.ReportsTooLarge)) {
				t.Errorf("got metrics %s, want %s 1", out.String(), metrics.ReportsTooLarge)
			}
		})
	}
	t.Run("a report at the bound's entries is applied", func(t *testing.T) {
		store, h := emptyFleet(t)
		small := inventory.Bound{MemoryMB: 1, Entries: 3, Bytes: 1 << 20}
		upload(t, "reports/edge.json", reportBody(false, up("E1", "E2", "E3"), false), false)
		if res, err := h.Bounded(small).Handle(t.Context(), objectEvent(time.Now(), local.ReportsBucket, "reports/edge.json")); err != nil || res.Machines != 3 {
			t.Fatalf("got %+v, %v, want 3 machines applied", res, err)
		}
		upload(t, "reports/edge.json", reportBody(false, up("E1", "E2", "E3", "E4"), false), false)
		if _, err := h.Bounded(small).Handle(t.Context(), objectEvent(time.Now(), local.ReportsBucket, "reports/edge.json")); err == nil {
			t.Errorf("got 4 machines applied, want the report refused past 3")
		}
		if got := states(t, store); len(got) != 3 {
			t.Errorf("got %v, want E1 to E3", got)
		}
	})
}

// TestAPartWithInvalidTextFailsAndStoresNothing: parts are written by the
// plan step, but whoever can write to the bucket can write one; a part
// holding text that is not valid fails its step rather than store U+FFFD.
func TestAPartWithInvalidTextFailsAndStoresNothing(t *testing.T) {
	store, _ := emptyFleet(t)
	objects := reportstore.New(local.S3)
	h := inventory.New(store, machine.DefaultLossBrake, quiet, nil).ReadsFrom(local.ReportsBucket, objects).FansOut(store, objects, 10)
	key := inventory.WorkPrefix + "tampered/part-0000.json"
	upload(t, key, []byte("[{\"id\":\"W1\",\"host\":\"bad-\xff\xfe-host\",\"at\":1}]"), false)
	step := fmt.Sprintf(`{"step":%q,"report":"tampered","bucket":%q,"key":%q}`, inventory.StepApplyPart, local.ReportsBucket, key)
	if _, err := h.Handle(t.Context(), json.RawMessage(step)); err == nil || !strings.Contains(err.Error(), "not valid text") {
		t.Errorf("got %v, want the part refused for its text", err)
	}
	if got := states(t, store); len(got) != 0 {
		t.Errorf("got %v, want nothing stored", got)
	}
}
