package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/sync/errgroup"

	"github.com/fleetops/fleet/client"
	"github.com/fleetops/fleet/internal/termtext"
)

// partSuffix marks a download in progress; it becomes the log's file once
// complete.
const partSuffix = ".part"

// cache is a directory of downloaded logs, each at <dir>/<cacheRel(key)>.
// A log is complete when its file has the listed size and modification
// time; a partial download is that path with .part, resumed with an HTTP
// Range request.
type cache struct {
	dir  string
	http *http.Client
}

// newCache returns the cache in dir; a download waits at most timeout for
// the headers of its answer.
func newCache(dir string, timeout time.Duration) *cache {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	// Logs are compressed already or compress on the fly nowhere: asking
	// for gzip would only cost the server CPU and break Range offsets.
	t.DisableCompression = true
	t.ResponseHeaderTimeout = timeout
	return &cache{dir: dir, http: &http.Client{Transport: t}}
}

// path returns where key is kept (see cacheRel).
func (c *cache) path(key string) string {
	return filepath.Join(c.dir, cacheRel(key))
}

// complete reports whether l is in the cache, whole.
func (c *cache) complete(l client.Log) (string, bool) {
	p := c.path(l.Key)
	fi, err := os.Stat(p)
	return p, err == nil && fi.Mode().IsRegular() && fi.Size() == l.Size && fi.ModTime().UnixMilli() == l.LastModified
}

type fetchStats struct {
	fetched, cached int
	bytes           int64
}

// fetchFailure is a log that could not be fetched.
type fetchFailure struct {
	key string
	err error
}

// fetchAll downloads every log not complete in the cache, jobs at a time,
// with progress bars on w when progress is set. One log's failure stops
// no other download: every failure is returned, by key, in the order of
// logs. Only ctx ending stops them all, and then its error is returned.
func (c *cache) fetchAll(ctx context.Context, logs []client.Log, jobs int, w io.Writer, progress bool) (fetchStats, []fetchFailure, error) {
	var stats fetchStats
	var total int64
	for _, l := range logs {
		total += l.Size
	}
	var bars *mpb.Progress
	var totalBar *mpb.Bar
	if progress {
		bars = mpb.NewWithContext(ctx, mpb.WithOutput(w), mpb.WithWidth(40), mpb.WithAutoRefresh())
		start := time.Now()
		totalBar = bars.New(total, mpb.BarStyle(),
			mpb.PrependDecorators(decor.Name(fmt.Sprintf("total (%d logs)", len(logs)), decor.WC{C: decor.DindentRight | decor.DextraSpace}),
				counters()),
			mpb.AppendDecorators(decor.Percentage(decor.WC{W: 5}), decor.Any(func(s decor.Statistics) string {
				return " " + bytesHuman(int64(float64(s.Current)/max(time.Since(start).Seconds(), 0.001))) + "/s"
			})),
			mpb.BarPriority(1<<30))
	}
	var fetched, cached atomic.Int64
	var bytes atomic.Int64
	failures := make([]error, len(logs))
	var g errgroup.Group
	g.SetLimit(jobs)
	for i, l := range logs {
		if _, ok := c.complete(l); ok {
			cached.Add(1)
			if totalBar != nil {
				totalBar.IncrInt64(l.Size)
			}
			continue
		}
		g.Go(func() error {
			var bar *mpb.Bar
			if bars != nil {
				bar = bars.New(l.Size, mpb.BarStyle(),
					mpb.PrependDecorators(decor.Name(short(termtext.Visible(path.Base(l.Key)), 40), decor.WC{W: 41, C: decor.DindentRight})),
					mpb.AppendDecorators(counters()),
					mpb.BarRemoveOnComplete())
			}
			n, err := c.fetch(ctx, l, func(done int64, resumed bool) {
				if bar == nil {
					return
				}
				if resumed {
					bar.SetCurrent(done)
				} else {
					bar.IncrInt64(done)
				}
				totalBar.IncrInt64(done)
			})
			if bar != nil {
				if err != nil {
					bar.Abort(true)
				} else {
					bar.SetTotal(-1, true)
				}
			}
			if err != nil {
				failures[i] = err
				return nil
			}
			fetched.Add(1)
			bytes.Add(n)
			return nil
		})
	}
	g.Wait()
	var failed []fetchFailure
	for i, err := range failures {
		if err != nil {
			failed = append(failed, fetchFailure{logs[i].Key, err})
		}
	}
	if bars != nil {
		if failed != nil || ctx.Err() != nil {
			totalBar.Abort(false)
		} else {
			totalBar.SetTotal(-1, true)
		}
		bars.Wait()
	}
	stats.fetched, stats.cached, stats.bytes = int(fetched.Load()), int(cached.Load()), bytes.Load()
	if ctx.Err() != nil {
		return stats, nil, ctx.Err()
	}
	return stats, failed, nil
}

// counters is a bar's "done / total" in the units of bytesHuman.
func counters() decor.Decorator {
	return decor.Any(func(s decor.Statistics) string {
		return bytesHuman(s.Current) + " / " + bytesHuman(s.Total)
	})
}

// fetch downloads l into the cache, resuming a partial download, and
// returns the bytes it transferred. It calls advance with the bytes
// already there (resumed true) and then with every chunk read. The .part
// file is made only once the download answered: a log that cannot be
// downloaded leaves nothing behind. Its errors do not name the key.
func (c *cache) fetch(ctx context.Context, l client.Log, advance func(n int64, resumed bool)) (int64, error) {
	if l.DownloadURL == "" {
		return 0, errors.New("the service answered no download link")
	}
	final := c.path(l.Key)
	part := final + partSuffix
	var have int64
	if fi, err := os.Stat(part); err == nil && fi.Mode().IsRegular() && fi.Size() <= l.Size {
		have = fi.Size()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.DownloadURL, nil)
	if err != nil {
		return 0, client.Redact(err)
	}
	if have > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(have, 10)+"-")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, client.Redact(err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusPartialContent && strings.HasPrefix(resp.Header.Get("Content-Range"), fmt.Sprintf("bytes %d-", have)):
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable && have == l.Size:
		resp.Body.Close()
	case resp.StatusCode == http.StatusOK:
		have = 0 // the server sent it whole: start again
	default:
		return 0, downloadError(resp)
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return 0, err
	}
	f, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := f.Truncate(have); err != nil {
		return 0, err
	}
	if _, err := f.Seek(have, io.SeekStart); err != nil {
		return 0, err
	}
	advance(have, true)
	var n int64
	if resp.StatusCode != http.StatusRequestedRangeNotSatisfiable {
		n, err = io.CopyBuffer(f, &counting{r: resp.Body, advance: advance}, make([]byte, 256<<10))
		if err != nil {
			return n, client.Redact(err)
		}
	}
	if have+n != l.Size {
		return n, fmt.Errorf("got %d bytes, want %d (the log changed since it was listed?)", have+n, l.Size)
	}
	if err := f.Close(); err != nil {
		return n, err
	}
	mtime := time.UnixMilli(l.LastModified)
	if err := os.Chtimes(part, mtime, mtime); err != nil {
		return n, err
	}
	if err := os.Rename(part, final); err != nil {
		// final is a directory: the key is also the folder of another
		// key (a/b and a/b/c), which a file system cannot hold both of.
		os.Remove(part)
		return n, err
	}
	return n, nil
}

// s3Code finds the <Code> of an S3 error body.
var s3Code = regexp.MustCompile(`<Code>([A-Za-z0-9]{1,64})</Code>`)

// downloadError words a refused download by its status and S3's error
// code. The rest of S3's body is left out: it can quote the signed
// request.
func downloadError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if m := s3Code.FindSubmatch(body); m != nil {
		return fmt.Errorf("download answered %s (%s)", resp.Status, m[1])
	}
	return fmt.Errorf("download answered %s", resp.Status)
}

// counting reports every read to advance.
type counting struct {
	r       io.Reader
	advance func(n int64, resumed bool)
}

func (c *counting) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.advance(int64(n), false)
	}
	return n, err
}

// open returns l's content, from the cache when it is complete there, else
// streamed through its link, gunzipped when it is gzip data. Its errors do
// not name the key.
func (c *cache) open(ctx context.Context, l client.Log) (io.ReadCloser, error) {
	var raw io.ReadCloser
	if p, ok := c.complete(l); ok {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		raw = f
	} else {
		if l.DownloadURL == "" {
			return nil, errors.New("the service answered no download link")
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.DownloadURL, nil)
		if err != nil {
			return nil, client.Redact(err)
		}
		resp, err := c.http.Do(req)
		if err != nil {
			return nil, client.Redact(err)
		}
		if resp.StatusCode != http.StatusOK {
			defer resp.Body.Close()
			return nil, downloadError(resp)
		}
		raw = resp.Body
	}
	return gunzipped(raw)
}

// gunzipped reads r through gzip when it starts with gzip's magic number:
// keys do not always end in .gz, and some that do were stored plain.
func gunzipped(r io.ReadCloser) (io.ReadCloser, error) {
	br := bufio.NewReaderSize(r, 256<<10)
	magic, err := br.Peek(2)
	if err != nil && !errors.Is(err, io.EOF) {
		r.Close()
		return nil, err
	}
	if len(magic) < 2 || magic[0] != 0x1f || magic[1] != 0x8b {
		return struct {
			io.Reader
			io.Closer
		}{br, r}, nil
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		r.Close()
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{zr, r}, nil
}

// copyTo writes l's content to w. Its errors do not name the key.
func (c *cache) copyTo(ctx context.Context, w io.Writer, l client.Log) error {
	r, err := c.open(ctx, l)
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = io.Copy(w, r)
	return client.Redact(err)
}
