package apidoc_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/fleetops/fleet/dev/apidoc"
	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/web"
)

// fresh parses the repository's document anew, so that the counts of a
// test are its own.
func fresh(t *testing.T) *apidoc.Doc {
	t.Helper()
	root, err := stack.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, apidoc.File))
	if err != nil {
		t.Fatal(err)
	}
	d, err := apidoc.Parse(data)
	if err != nil {
		t.Fatalf("%s: %v", apidoc.File, err)
	}
	return d
}

const slaveID = "20261121-051400-16777343-5050-1234-S1"

const slaveBody = `{"id":"` + slaveID + `","firstSeenAt":1793491200000,` +
	`"currentState":{"objectId":"` + slaveID + `","state":"ACTIVE","timestamp":1793491200000},` +
	`"host":"node-1.example.com","rackId":"us-east-1a","attributes":{},"sequence":7}`

func jsonHeader(extra ...string) http.Header {
	h := http.Header{"Content-Type": {"application/json"}}
	for i := 0; i+1 < len(extra); i += 2 {
		h.Set(extra[i], extra[i+1])
	}
	return h
}

func gzipped(s string) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(s))
	w.Close()
	return b.Bytes()
}

func TestCheck(t *testing.T) {
	d := fresh(t)
	details := "/api/slaves/slave/" + slaveID + "/details"
	tests := []struct {
		name, method, target string
		status               int
		header               http.Header
		body                 []byte
		wantErr              string // "" for a match
	}{
		{"a slave with every required field passes", "GET", details, 200, jsonHeader(), []byte(slaveBody), ""},
		{"a slave with resources passes", "GET", details, 200, jsonHeader(),
			[]byte(strings.Replace(slaveBody, `"attributes":{}`, `"attributes":{"a":"b"},"resources":{"cpus":16,"ports":"[31000-32000]"}`, 1)), ""},
		{"the same route with an encoded slash in the id passes", "GET", "/api/slaves/slave/a%2Fb/details", 200, jsonHeader(), []byte(slaveBody), ""},
		{"HEAD is checked as GET, without its body", "HEAD", details, 200, jsonHeader(), nil, ""},
		{"a gzip body is decompressed first", "GET", details, 200, jsonHeader("Content-Encoding", "gzip"), gzipped(slaveBody), ""},
		{"an empty 200 of a change passes", "POST", "/api/slaves/slave/" + slaveID + "/freeze", 200, jsonHeader(), nil, ""},
		{"an error body passes", "POST", "/api/slaves/slave/x/freeze", 409, jsonHeader(), []byte(`{"code":409,"message":"FAILURE_ALREADY_AT_STATE - Slave x is in FROZEN state"}`), ""},
		{"a 503 with Retry-After passes", "GET", "/api/slaves", 503, jsonHeader("Retry-After", "1"), []byte(`{"code":503,"message":"DynamoDB is busy, try again"}`), ""},
		{"the list with a trailing slash passes", "GET", "/api/slaves/?state=frozen", 200, jsonHeader("X-Changes-Cursor", "c"), []byte(`[` + slaveBody + `]`), ""},
		{"a list without its feed cursor fails", "GET", "/api/slaves", 200, jsonHeader(), []byte(`[]`), `response header "X-Changes-Cursor" missing`},
		{"a log lookup with Cache-Control passes", "GET", "/api/logs/task/t", 200, jsonHeader("Cache-Control", "no-store"),
			[]byte(`[{"key":"k","lastModified":1,"size":2,"getUrl":"https://a/k","downloadUrl":"https://a/k?d"},{"key":"k2","lastModified":1,"size":2,"endTime":5}]`), ""},

		{"an unknown field fails", "GET", details, 200, jsonHeader(),
			[]byte(strings.Replace(slaveBody, `"host"`, `"slaveId":"x","host"`, 1)), `property "slaveId" is unsupported`},
		{"null for an optional field fails", "GET", details, 200, jsonHeader(),
			[]byte(strings.Replace(slaveBody, `"host"`, `"resources":null,"host"`, 1)), "at /resources: Value is not nullable"},
		{"null for a nested optional field fails", "GET", "/api/slaves/slave/" + slaveID, 200, jsonHeader(),
			[]byte(`[{"objectId":"x","state":"ACTIVE","timestamp":1,"user":null}]`), "at /0/user: Value is not nullable"},
		{"a missing required field fails", "GET", details, 200, jsonHeader(),
			[]byte(strings.Replace(slaveBody, `,"attributes":{}`, ``, 1)), `property "attributes" is missing`},
		{"a state outside the enum fails", "GET", "/api/slaves/slave/" + slaveID, 200, jsonHeader(),
			[]byte(`[{"objectId":"x","state":"frozen","timestamp":1}]`), "at /0/state: value is not one of the allowed values"},
		{"a log with one link of two fails", "GET", "/api/logs/task/t", 200, jsonHeader("Cache-Control", "no-store"),
			[]byte(`[{"key":"k","lastModified":1,"size":2,"getUrl":"https://a/k"}]`), "doesn't match"},
		{"a log lookup without Cache-Control fails", "GET", "/api/logs/task/t", 200, jsonHeader(), []byte(`[]`), `response header "Cache-Control" missing`},
		{"an undescribed route fails", "GET", "/api/slaves/nothing", 404, jsonHeader(), []byte(`{"code":404,"message":"no route for GET /api/slaves/nothing"}`), "no operation describes GET /api/slaves/nothing"},
		{"an undescribed method fails", "PUT", "/api/slaves/slave/x/freeze", 404, jsonHeader(), []byte(`{"code":404,"message":"no route for PUT"}`), "no operation describes PUT"},
		{"an empty segment is no id", "GET", "/api/slaves/slave//details", 404, jsonHeader(), []byte(`{"code":404,"message":"no route"}`), "no operation describes"},
		{"an undescribed status fails", "GET", "/api/slaves", 404, jsonHeader(), []byte(`{"code":404,"message":"x"}`), "status 404 is not described"},
		{"a body on an empty 200 fails", "POST", "/api/slaves/slave/x/activate", 200, jsonHeader(), []byte(`{}`), "want none"},
		{"another Content-Type fails", "GET", details, 200, jsonHeader("Content-Type", "text/plain"), []byte(slaveBody), `got Content-Type "text/plain"`},
		{"a 503 without Retry-After fails", "GET", "/api/slaves", 503, jsonHeader(), []byte(`{"code":503,"message":"busy"}`), `response header "Retry-After" missing`},
		{"an error whose code is not its status fails", "GET", "/api/slaves", 400, jsonHeader(), []byte(`{"code":404,"message":"x"}`), "want code 400"},
		{"an error with more than code and message fails", "GET", "/api/slaves", 400, jsonHeader(), []byte(`{"code":400,"message":"x","detail":"y"}`), `property "detail" is unsupported`},
		{"a bare-text error fails", "GET", "/api/slaves", 400, jsonHeader("Content-Type", "text/plain"), []byte(`bad request`), `got Content-Type "text/plain"`},
		{"a gzip header on a plain body fails", "GET", details, 200, jsonHeader("Content-Encoding", "gzip"), []byte(slaveBody), "Content-Encoding gzip"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := d.Check(httptest.NewRequest(tt.method, tt.target, nil), tt.status, tt.header, tt.body)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("got %v, want a match", err)
			case tt.wantErr != "" && err == nil:
				t.Errorf("got a match, want an error with %q", tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Errorf("got %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
	t.Run("an undescribed route is ErrUndescribed", func(t *testing.T) {
		err := d.Check(httptest.NewRequest("GET", "/api/nothing", nil), 404, jsonHeader(), []byte(`{"code":404,"message":"x"}`))
		if !errors.Is(err, apidoc.ErrUndescribed) {
			t.Errorf("got %v, want ErrUndescribed", err)
		}
	})
}

func TestCheckAny(t *testing.T) {
	d := fresh(t)
	tests := []struct {
		name, method, target string
		status               int
		header               http.Header
		body                 string
		ok                   bool
	}{
		{"an undescribed route answered with a JSON 404 passes", "GET", "/api/slaves/slave/x/y/z", 404, jsonHeader(), `{"code":404,"message":"no route for GET /api/slaves/slave/x/y/z"}`, true},
		{"a described route is checked as Check does", "GET", "/api/slaves", 404, jsonHeader(), `{"code":404,"message":"x"}`, false},
		{"an undescribed route answered 200 fails", "GET", "/api/slaves/extra", 200, jsonHeader(), `[]`, false},
		{"an undescribed route answered with bare text fails", "GET", "/api/slaves/extra", 404, jsonHeader("Content-Type", "text/plain"), `404 page not found`, false},
		{"an undescribed route answered with another error shape fails", "GET", "/api/slaves/extra", 404, jsonHeader(), `{"error":"not found"}`, false},
		{"an undescribed route with a query that does not parse answered with a JSON 400 passes", "GET", "/api/slaves/extra?state=%", 400, jsonHeader(), `{"code":400,"message":"malformed query string"}`, true},
		{"an undescribed route with a query that does not parse answered 404 fails", "GET", "/api/slaves/extra?state=%", 404, jsonHeader(), `{"code":404,"message":"no route"}`, false},
		{"an undescribed route with a query that parses answered 400 fails", "GET", "/api/slaves/extra?state=%25", 400, jsonHeader(), `{"code":400,"message":"malformed query string"}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := d.CheckAny(httptest.NewRequest(tt.method, tt.target, nil), tt.status, tt.header, []byte(tt.body))
			if (err == nil) != tt.ok {
				t.Errorf("got %v, want ok %v", err, tt.ok)
			}
		})
	}
}

// reporter collects what a Recorder reports.
type reporter struct{ errs []string }

func (r *reporter) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestRecorderPassesAnswersOnAndReportsMismatches(t *testing.T) {
	d := fresh(t)
	var rep reporter
	h := d.Recorder(&rep, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/slaves":
			w.Header().Set("X-Changes-Cursor", "c")
			w.Write([]byte(`[]`))
		case "/api/slaves/expiring":
			w.Write([]byte(`[{"machineId":"x"}]`))
		default:
			w.WriteHeader(404)
			w.Write([]byte(`{"code":404,"message":"no route for ` + r.Method + " " + r.URL.Path + `"}`))
		}
	}))
	for _, target := range []string{"/api/slaves", "/api/slaves/expiring", "/api/other"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
		if target == "/api/slaves" && (rec.Code != 200 || rec.Body.String() != "[]" || rec.Header().Get("Content-Type") != "application/json") {
			t.Errorf("got %d %s %v, want the answer passed on", rec.Code, rec.Body, rec.Header())
		}
	}
	if len(rep.errs) != 1 || !strings.Contains(rep.errs[0], "GET /api/slaves/expiring") || !strings.Contains(rep.errs[0], `property "startMillis" is missing`) {
		t.Errorf("got reports %q, want one about the expiring list", rep.errs)
	}
	if described, undescribed := d.Checked(); described != 2 || undescribed != 1 {
		t.Errorf("got %d and %d answers checked, want 2 described and 1 undescribed", described, undescribed)
	}
	unexercised := d.Unexercised("/api/slaves")
	if slices.Contains(unexercised, "GET /api/slaves") || slices.Contains(unexercised, "GET /api/slaves/expiring") || !slices.Contains(unexercised, "DELETE /api/slaves/dead") {
		t.Errorf("got unexercised %v, want every operation but the two answered", unexercised)
	}
	if s := d.Summary("/api/slaves/expiring"); s != "GET /api/slaves/expiring: 200×1 (400) (401) (403) (413) (429) (500) (503) (504)\n" {
		t.Errorf("got summary %q", s)
	}
}

// A client that went away gets web's 499, which no one reads and the
// document does not list: it is not checked. The same 499 to a client
// still there is reported.
func TestRecorderLeavesTheAnswerToAClientThatWentAwayUnchecked(t *testing.T) {
	d := fresh(t)
	var rep reporter
	h := d.Recorder(&rep, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		web.Error(w, r, fmt.Errorf("list slaves: %w", context.Canceled))
	}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequestWithContext(ctx, "GET", "/api/slaves", nil))
	if len(rep.errs) != 0 {
		t.Errorf("got reports %q, want none for a client that went away", rep.errs)
	}
	h = d.Recorder(&rep, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(web.StatusClientClosedRequest)
	}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/api/slaves", nil))
	if len(rep.errs) != 1 || !strings.Contains(rep.errs[0], "status 499 is not described") {
		t.Errorf("got reports %q, want the 499 to a client still there reported", rep.errs)
	}
}

func TestServedRoutesAndCompareRoutes(t *testing.T) {
	src := filepath.Join(t.TempDir(), "routes.go")
	os.WriteFile(src, []byte(`package x

func New() {
	h.mux.HandleFunc("GET /api/slaves", h.list)
	h.mux.HandleFunc("GET /api/slaves/{$}", h.list)
	h.mux.Handle("DELETE /api/slaves/slave/{slaveId}", h.delete)
	h.mux.HandleFunc("/", web.NotFound)
	other("GET /not/a/route")
}
`), 0o644)
	got, err := apidoc.ServedRoutes(src)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"DELETE /api/slaves/slave/{slaveId}", "GET /api/slaves", "GET /api/slaves/"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	d := fresh(t)
	err = d.CompareRoutes("/api/slaves", append(got, "PUT /api/slaves/slave/{slaveId}"))
	if err == nil || !strings.Contains(err.Error(), "served but not described in openapi.yaml: PUT /api/slaves/slave/{slaveId}") ||
		!strings.Contains(err.Error(), "described in openapi.yaml but not served: DELETE /api/slaves/dead") {
		t.Errorf("got %v, want both directions named", err)
	}
}

func TestProbeFindsUndescribedAndUnservedRoutes(t *testing.T) {
	d := fresh(t)
	notFound := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(404)
		fmt.Fprintf(w, `{"code":404,"message":"no route for %s %s"}`, r.Method, r.URL.Path)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/logs/task/{taskId}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Write([]byte(`[]`))
	})
	mux.HandleFunc("PUT /api/logs/task/{taskId}", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	mux.HandleFunc("/", notFound)
	var rep reporter
	d.Probe(&rep, mux, "/api/logs", map[string]string{"taskId": "t", "requestId": "r", "deployId": "d"})
	joined := strings.Join(rep.errs, "\n")
	for _, want := range []string{
		"PUT /api/logs/task/{taskId} is served but not described",
		"GET /api/logs/request/{requestId} is described in openapi.yaml but not served",
		"POST /api/logs/search is described in openapi.yaml but not served",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("got reports:\n%s\nwant one with %q", joined, want)
		}
	}
	if strings.Contains(joined, "GET /api/logs/task/{taskId} is") {
		t.Errorf("got reports:\n%s\nwant none about the task lookup, which is served and described", joined)
	}
}

func TestLoadSharesOneDocAndItsJSONIsTheYAML(t *testing.T) {
	a, err := apidoc.Load()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := apidoc.Load()
	if a != b {
		t.Error("got two documents, want Load to parse once")
	}
	var fromYAML, fromJSON any
	if err := yaml.Unmarshal(a.YAML(), &fromYAML); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(a.JSON(), &fromJSON); err != nil {
		t.Fatal(err)
	}
	y, _ := json.Marshal(fromYAML)
	j, _ := json.Marshal(fromJSON)
	if !bytes.Equal(y, j) {
		t.Error("got a JSON document that differs from the YAML one")
	}
	if ops := a.Operations(""); len(ops) != 17 {
		t.Errorf("got %d operations, want 17: %v", len(ops), ops)
	}
}
