package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/dev/fleettable"
	"github.com/fleetops/fleet/dev/lambdarun"
	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/inventory"
)

// reportBounds measures what a report object may expand to
// (docs/behaviour.md "How large a report may be"), on the real
// InventoryFunction binary at the template's MemorySize, as the plan step
// of ReportStateMachine: how soon it refuses a gigabyte bomb (a 1 MB gzip
// of whitespace, and one valid line repeated), and its peak memory on a
// complete report at the bound, every entry of the average size the bound
// allows, against a fleet of as many machines. -quick leaves the report at
// the bound out (two minutes, most of it the emulator writing its parts).
func reportBounds(ctx context.Context, e *env) ([]row, error) {
	dir, err := os.MkdirTemp("", "fleet-bench-bounds-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	fn, err := inventoryFunction(ctx, e, dir)
	if err != nil {
		return nil, err
	}
	bound := inventory.BoundFor(fn.MemorySize)
	table, err := fleettable.New(fleettable.Items(bound.Entries, 0), scanLatency)
	if err != nil {
		return nil, err
	}
	srv := httptest.NewServer(withMark{table})
	defer srv.Close()
	fn.Env["AWS_ENDPOINT_URL_DYNAMODB"] = srv.URL
	// The report objects, and the parts the plan writes, in MinIO: the
	// emulator, one request at a time, took most of the section writing
	// 64 parts of 2 MB, and the figure is the plan's memory.
	objects := stack.S3Client(e.minio.Endpoint, e.minio.AccessKey, e.minio.SecretKey)
	if err := stack.CreateBuckets(ctx, objects, e.local.ReportsBucket); err != nil {
		return nil, err
	}
	fn.Env["AWS_ENDPOINT_URL_S3"] = e.minio.Endpoint
	fn.Env["AWS_ACCESS_KEY_ID"], fn.Env["AWS_SECRET_ACCESS_KEY"] = e.minio.AccessKey, e.minio.SecretKey

	var rows []row
	line := `{"id":"fleet-000001","host":"node-000001.us-east-1.compute.internal","rackId":"us-east-1b","resources":{"cpus":16}}` + "\n"
	for _, bomb := range []struct {
		name, key string
		object    []byte
	}{
		{"1 GB of whitespace", "reports/bench-bomb-space.json.gz", gzipRepeated(`{"complete":true,"machines":[`, strings.Repeat(" ", 4096), "]}", 1<<30)},
		{"one valid line repeated to 1 GB", "reports/bench-bomb-lines.jsonl.gz", gzipRepeated("{\"complete\":true}\n", line, "", 1<<30)},
	} {
		res, err := planObject(ctx, e, objects, fn, bomb.key, bomb.object)
		var ferr *lambdarun.FunctionError
		refused := errors.As(err, &ferr) && ferr.Type == "TooLargeError"
		value := fmt.Sprintf("refused in %.2f s (%.1f MB gzip), Max Memory Used %d MB", res.Handler().Seconds(), mb(len(bomb.object)), res.MaxMemory>>20)
		if refused {
			reason, _, _ := strings.Cut(ferr.Message, ",")
			value += ": " + reason
		} else {
			value = fmt.Sprintf("not refused as too large after %.1f s: %v", res.Handler().Seconds(), err)
		}
		rows = append(rows, row{figure: fmt.Sprintf("plan step on a %s bomb at %d MB: time to refuse it (TooLargeError)", bomb.name, fn.MemorySize),
			value: value, target: "≤ 10 s", met: verdict(refused && res.Handler() <= 10*time.Second)})
	}

	if e.quick {
		return append(rows, row{figure: "plan step on a complete report at the bound: peak memory", value: "not measured with -quick"}), nil
	}
	// At the bound: every machine of the fleet, each entry padded (in an
	// attribute, which the plan holds) to the bound's average size.
	var buf bytes.Buffer
	z := gzip.NewWriter(&buf)
	fmt.Fprint(z, `{"complete":true,"machines":[`)
	per := int(bound.Bytes)/bound.Entries - 2
	for i := range bound.Entries {
		if i > 0 {
			fmt.Fprint(z, ",")
		}
		entry := fmt.Sprintf(`{"id":"fleet-%06d","host":"node-%06d.us-east-1.compute.internal","rackId":"us-east-1%c",`+
			`"resources":{"cpus":16,"mem":63000,"disk":500000,"ports":"[31000-32000]"},"attributes":{"instance_type":"m5.4xlarge","note":"`, i, i, 'a'+i%6)
		fmt.Fprint(z, entry, strings.Repeat("x", max(0, per-len(entry)-3)), `"}}`)
	}
	fmt.Fprint(z, "]}")
	z.Close()
	res, err := planObject(ctx, e, objects, fn, "reports/bench-at-bound.json.gz", buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("report at the bound (%d machines, %d MB): %w", bound.Entries, bound.Bytes>>20, err)
	}
	rows = append(rows, row{figure: fmt.Sprintf("plan step on a complete report at the bound of %d MB (%d machines, %d MB decompressed, %.1f MB gzip) against a fleet of as many: peak memory (Max Memory Used)",
		fn.MemorySize, bound.Entries, bound.Bytes>>20, mb(buf.Len())),
		value:  fmt.Sprintf("%d MB in %.1f s (%s)", res.MaxMemory>>20, res.Handler().Seconds(), strings.TrimSpace(string(res.Response))),
		target: fmt.Sprintf("≤ %d MB", fn.MemorySize), met: verdict(res.MaxMemory <= int64(fn.MemorySize)<<20)})
	return rows, nil
}

// planObject writes object to the reports bucket of client under key and
// runs fn as ReportStateMachine's plan step on S3's event for it.
func planObject(ctx context.Context, e *env, client *s3.Client, fn lambdarun.Function, key string, object []byte) (lambdarun.Result, error) {
	if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(e.local.ReportsBucket), Key: aws.String(key), Body: bytes.NewReader(object)}); err != nil {
		return lambdarun.Result{}, err
	}
	event := fmt.Sprintf(`{"step":"plan","event":{"detail-type":"Object Created","source":"aws.s3","time":%q,"detail":{"bucket":{"name":%q},"object":{"key":%q}}}}`,
		time.Now().UTC().Format(time.RFC3339), e.local.ReportsBucket, key)
	return fn.Invoke(ctx, []byte(event))
}

// gzipRepeated is a gzip object of head, body repeated to about size bytes,
// and tail, each a gzip member of its own and the repeated one compressed
// once: a gigabyte is built in a second.
func gzipRepeated(head, body, tail string, size int) []byte {
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
