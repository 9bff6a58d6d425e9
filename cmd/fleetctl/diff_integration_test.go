//go:build integration

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetops/fleet/client"
	"github.com/fleetops/fleet/dev/apitest"
)

// rewriting serves the API of the stack through a proxy that edits the
// JSON of the answers edit names by path (the query's state too, for a
// list: "/api/slaves/?state=FROZEN"); every other answer passes as it is.
func rewriting(t *testing.T, edits map[string]func(v any) any) *httptest.Server {
	t.Helper()
	target, err := url.Parse(servers[apitest.None].URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		// The proxy's own transport then asks for gzip and unpacks it:
		// the edits read plain JSON.
		r.Out.Header.Del("Accept-Encoding")
	}}
	proxy.ModifyResponse = func(resp *http.Response) error {
		name := resp.Request.URL.Path
		if st := resp.Request.URL.Query().Get("state"); st != "" {
			name += "?state=" + st
		}
		edit, ok := edits[name]
		if !ok || resp.StatusCode != http.StatusOK {
			return nil
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return err
		}
		if body, err = json.Marshal(edit(v)); err != nil {
			return err
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
		return nil
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	return srv
}

// TestDiffAgainstTheStackItselfAndARewritingProxy runs diff as a user
// would: the same API on both sides is the same; a proxy in front of it
// that rewrites four answers is different in exactly those four places;
// an API that does not answer is unavailable.
func TestDiffAgainstTheStackItselfAndARewritingProxy(t *testing.T) {
	p := fmt.Sprintf("dif%d", time.Now().UnixNano()%1e9)
	machines(t, p+"-1", p+"-2", p+"-3")
	change(t, p+"-2", client.Frozen, "kernel upgrade")
	fleetctl(t, apitest.None, nil, "freeze", p+"-3", "-m", "disk check", "--for", "2h").want(t, 0)
	request := p + "logs"
	_, tasks := logSet(t, request, 0)
	stack := servers[apitest.None].URL

	t.Run("the same API on both sides is the same", func(t *testing.T) {
		r := fleetctl(t, apitest.None, nil, "diff", "--old", stack, "--new", stack,
			"--request", request, "--deploy", request+"/d1", "--log-sample", "2").want(t, exitOK)
		if !regexp.MustCompile(`^compared \d+ slaves \(details, history\), 8 lists, \d+ expiring changes?, 4 log lookups: 0 differences\n$`).MatchString(r.stdout) || r.stderr != "" {
			t.Errorf("got stdout %q stderr %q, want the summary alone: 0 differences, 4 log lookups", r.stdout, r.stderr)
		}
	})

	t.Run("a proxy that rewrites four answers differs in those four", func(t *testing.T) {
		history, err := api(t).GetSlaveHistory(context.Background(), p+"-2", 0)
		if err != nil || len(history) == 0 {
			t.Fatalf("got history %v (%v)", history, err)
		}
		logs, err := api(t).GetTaskLogs(context.Background(), tasks[0], client.LogQuery{ListOnly: true})
		if err != nil || len(logs) == 0 {
			t.Fatalf("got logs %v (%v)", logs, err)
		}
		resized := logs[0]
		proxy := rewriting(t, map[string]func(any) any{
			// The user of p-2's newest history entry.
			"/api/slaves/slave/" + p + "-2": func(v any) any {
				v.([]any)[0].(map[string]any)["user"] = "mallory@example.com"
				return v
			},
			// p-3 missing from the FROZEN list.
			"/api/slaves/?state=FROZEN": func(v any) any {
				return slices.DeleteFunc(v.([]any), func(s any) bool { return s.(map[string]any)["id"] == p+"-3" })
			},
			// A field the service does not send, in p-1's details.
			"/api/slaves/slave/" + p + "-1/details": func(v any) any {
				v.(map[string]any)["decommissionedBy"] = "x"
				return v
			},
			// One log of the task one byte longer.
			"/api/logs/task/" + tasks[0]: func(v any) any {
				for _, l := range v.([]any) {
					if l := l.(map[string]any); l["key"] == resized.Key {
						l["size"] = resized.Size + 1
					}
				}
				return v
			},
		})
		r := fleetctl(t, apitest.None, nil, "diff", "--old", stack, "--new", proxy.URL, "--task", tasks[0], "--request", request)
		r.want(t, exitDifferent)
		oldUser := "(absent)"
		if history[0].User != "" {
			oldUser = strconv.Quote(history[0].User)
		}
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		want := []string{
			fmt.Sprintf("list state=FROZEN: %s-3 only in old", p),
			fmt.Sprintf(`slave %s-1 details: decommissionedBy: old (absent) new "x"`, p),
			fmt.Sprintf(`history %s-2[0].user: old %s new "mallory@example.com"`, p, oldUser),
			fmt.Sprintf("logs task %s: %s: size: old %d new %d", tasks[0], resized.Key, resized.Size, resized.Size+1),
		}
		if !slices.Equal(lines[:len(lines)-1], want) {
			t.Errorf("got\n%s\nwant\n%s", strings.Join(lines[:len(lines)-1], "\n"), strings.Join(want, "\n"))
		}
		if summary := lines[len(lines)-1]; !regexp.MustCompile(`^compared \d+ slaves \(details, history\), 8 lists, \d+ expiring changes?, 2 log lookups: 4 differences$`).MatchString(summary) {
			t.Errorf("got summary %q, want 4 differences of 2 log lookups", summary)
		}
		if r.stderr != "" {
			t.Errorf("got stderr %q, want none", r.stderr)
		}
	})

	t.Run("an API that does not answer is unavailable", func(t *testing.T) {
		fleetctl(t, apitest.None, []string{"FLEETCTL_TIMEOUT=2s"}, "diff", "--old", stack, "--new", "http://127.0.0.1:9").
			wantError(t, exitUnavailable, "list: new: unavailable", "127.0.0.1:9")
	})
}
