package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fleetops/fleet/client"
	"github.com/fleetops/fleet/dev/apitest"
)

// fleetctlLogs measures fleetctl against the tools it replaces, side by
// side over loopback: logs fetch of a request's gzipped logs against
// xargs -P <same -j> curl on the same presigned URLs, and logs grep over
// the fetched files against zcat | grep. The API runs over a MinIO of its
// own (dev/apitest); the objects are removed afterwards.
func fleetctlLogs(ctx context.Context, e *env) ([]row, error) {
	objects, size, reps, jobs := e.size(100, 40, 8), e.size(1_000_000, 500_000, 50_000), e.size(3, 1, 1), 8
	work, err := os.MkdirTemp("", "bench-fleetctl-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	binary, err := buildFleetctl(work)
	if err != nil {
		return nil, err
	}
	s, err := apitest.Up(ctx)
	if err != nil {
		return nil, err
	}
	defer s.Close() // removes MinIO's data directory, the objects with it
	rep := &benchReporter{}
	srv, err := s.Serve(rep, apitest.None)
	if err != nil {
		return nil, err
	}
	defer srv.Close()

	request := fmt.Sprintf("bench%d", time.Now().UnixNano())
	total, err := putGzipLogs(ctx, s, request, objects, size)
	if err != nil {
		return nil, err
	}
	env := append(os.Environ(), "FLEETCTL_ENDPOINT="+srv.URL, "HOME="+work)
	sel := []string{"--request", request, "--since", "7d"}
	listing, err := command(env, binary, append([]string{"logs", "ls", "--json"}, sel...)...).Output()
	if err != nil {
		return nil, fmt.Errorf("fleetctl logs ls: %w", err)
	}
	var logs []client.Log
	if err := json.Unmarshal(listing, &logs); err != nil || len(logs) != objects {
		return nil, fmt.Errorf("fleetctl logs ls: got %d logs (%v), want %d", len(logs), err, objects)
	}
	var pairs strings.Builder
	for i, l := range logs {
		fmt.Fprintf(&pairs, "%s %s\n", filepath.Join(work, "curl", fmt.Sprintf("%03d.gz", i)), l.DownloadURL)
	}

	var fetchTimes, curlTimes []time.Duration
	for r := range reps {
		cache := filepath.Join(work, fmt.Sprintf("cache-%d", r))
		began := time.Now()
		if out, err := command(append(env, "FLEETCTL_CACHE_DIR="+cache), binary, append([]string{"logs", "fetch", "-j", fmt.Sprint(jobs)}, sel...)...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("fleetctl logs fetch: %v: %s", err, out)
		}
		fetchTimes = append(fetchTimes, time.Since(began))
		if r < reps-1 {
			os.RemoveAll(cache)
		}

		os.RemoveAll(filepath.Join(work, "curl"))
		if err := os.MkdirAll(filepath.Join(work, "curl"), 0o755); err != nil {
			return nil, err
		}
		curl := exec.Command("xargs", "-P", fmt.Sprint(jobs), "-n", "2", "curl", "-sS", "--fail", "-o")
		curl.Stdin = strings.NewReader(pairs.String())
		began = time.Now()
		if out, err := curl.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("xargs curl: %v: %s", err, out)
		}
		curlTimes = append(curlTimes, time.Since(began))
	}
	fetch, curlTime := median(fetchTimes), median(curlTimes)
	ratio := float64(fetch) / float64(curlTime)

	// grep over what was fetched: fleetctl reads its cache, zcat the
	// files curl wrote; both write every matching line to /dev/null.
	const pattern = "status=503"
	cache := filepath.Join(work, fmt.Sprintf("cache-%d", reps-1))
	var grepTimes, zcatTimes []time.Duration
	var files []string
	for i := range logs {
		files = append(files, filepath.Join(work, "curl", fmt.Sprintf("%03d.gz", i)))
	}
	for range reps {
		began := time.Now()
		g := command(append(env, "FLEETCTL_CACHE_DIR="+cache), binary, append([]string{"logs", "grep", pattern}, sel...)...)
		if out, err := g.Output(); err != nil {
			return nil, fmt.Errorf("fleetctl logs grep: %v (%d bytes out)", err, len(out))
		}
		grepTimes = append(grepTimes, time.Since(began))

		sh := exec.Command("bash", "-c", `zcat "$@" | grep -- '`+pattern+`' > /dev/null`, "zcat-grep")
		sh.Args = append(sh.Args, files...)
		began = time.Now()
		if out, err := sh.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("zcat | grep: %v: %s", err, out)
		}
		zcatTimes = append(zcatTimes, time.Since(began))
	}
	grep, zcat := median(grepTimes), median(zcatTimes)
	if len(rep.errs) > 0 {
		return nil, fmt.Errorf("answers that do not match openapi.yaml: %s", strings.Join(rep.errs, "; "))
	}
	what := fmt.Sprintf("%d gzipped logs, %s", objects, bytesText(total))
	return []row{
		{figure: fmt.Sprintf("fleetctl logs fetch -j %d, %s (median of %d)", jobs, what, reps), value: fmt.Sprintf("%s (%.0f MB/s)", fetch.Round(time.Millisecond), float64(total)/fetch.Seconds()/1e6)},
		{figure: fmt.Sprintf("xargs -P %d curl, the same presigned URLs", jobs), value: curlTime.Round(time.Millisecond).String()},
		{figure: "fetch ÷ curl", value: fmt.Sprintf("%.2f×", ratio), target: "≤ 1.1×", met: verdict(ratio <= 1.1)},
		{figure: fmt.Sprintf("fleetctl logs grep %s over the fetched logs (median of %d)", pattern, reps), value: grep.Round(time.Millisecond).String()},
		{figure: `zcat \| grep, the same files`, value: zcat.Round(time.Millisecond).String()},
		{figure: `grep ÷ zcat \| grep`, value: fmt.Sprintf("%.2f×", float64(grep)/float64(zcat)), target: "< 1×", met: verdict(grep < zcat)},
	}, nil
}

func command(env []string, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = env
	return cmd
}

// putGzipLogs uploads n gzipped logs of about size bytes each, spread over
// 10 tasks of request that started 2 days ago, and returns the bytes
// uploaded. The logs are access-log lines with random ids, which compress
// about as real ones do; four bodies are made and reused.
func putGzipLogs(ctx context.Context, s *apitest.Stack, request string, n, size int) (int64, error) {
	bodies := make([][]byte, 4)
	for i := range bodies {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
		rng := rand.New(rand.NewPCG(uint64(i), 7))
		for line := 0; buf.Len() < size; line++ {
			status := []int{200, 200, 200, 201, 204, 404, 500, 503}[rng.IntN(8)]
			fmt.Fprintf(zw, "2026-11-21T05:14:%02d.%03dZ INFO request id=%016x path=/api/v1/items/%d status=%d took=%dms user=%08x\n",
				line%60, rng.IntN(1000), rng.Uint64(), rng.IntN(100000), status, rng.IntN(900), rng.Uint32())
			if line%1000 == 0 {
				zw.Flush()
			}
		}
		zw.Close()
		bodies[i] = buf.Bytes()
	}
	started := time.Now().Add(-48 * time.Hour).UnixMilli()
	var total int64
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	todo := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range todo {
				body := bodies[i%len(bodies)]
				task := fmt.Sprintf("%s-d1-%d-%d-node%d-us_east_1a", request, started, i%10, i%10)
				_, err := s.PutLog(ctx, apitest.Log{TaskID: task, Filename: "access.log.gz", Index: i, Modified: time.Now().Add(-time.Duration(i) * time.Minute), Body: body})
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				total += int64(len(body))
				mu.Unlock()
			}
		})
	}
	for i := range n {
		todo <- i
	}
	close(todo)
	wg.Wait()
	return total, firstErr
}

// benchReporter collects the answers that do not match openapi.yaml.
type benchReporter struct {
	mu   sync.Mutex
	errs []string
}

func (r *benchReporter) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func bytesText(n int64) string { return fmt.Sprintf("%.0f MB", float64(n)/1e6) }

// buildFleetctl builds fleetctl for this machine into dir, as make fleetctl
// does, for the sections that run it as a user would.
func buildFleetctl(dir string) (string, error) {
	binary := filepath.Join(dir, "fleetctl")
	if out, err := exec.Command("go", "build", "-o", binary, "./cmd/fleetctl").CombinedOutput(); err != nil {
		return "", fmt.Errorf("build fleetctl: %v: %s", err, out)
	}
	return binary, nil
}
