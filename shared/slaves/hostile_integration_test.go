//go:build integration

package slaves_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/web"
)

// Hostile and malformed input: every refusal here must be a JSON error that
// changed nothing, which each test checks by reading the slaves back.

// reportUp reports machines up by id through the inventory, JSON-encoding
// the ids so that any character reaches the report as it is.
func reportUp(t *testing.T, ids ...string) {
	t.Helper()
	var machines []map[string]any
	for _, id := range ids {
		machines = append(machines, map[string]any{"id": id, "host": "hostile.example.com", "rackId": "us-east-1a", "runningTasks": 0})
	}
	detail, err := json.Marshal(map[string]any{"complete": false, "machines": machines})
	if err != nil {
		t.Fatal(err)
	}
	if res := report(t, string(detail)); res.Invalid != 0 || res.Failed != 0 {
		t.Fatalf("report of %q: got %+v, want every machine applied", ids, res)
	}
}

// pathID escapes id as one path segment. "." and ".." are escaped too: as
// they are, they are path navigation, not a name.
func pathID(id string) string {
	if id == "." || id == ".." {
		return strings.ReplaceAll(id, ".", "%2E")
	}
	return url.PathEscape(id)
}

// snapshot is everything the API tells about the slaves: their details (or
// a 404), history and expiring record. Two equal snapshots mean nothing
// changed. The details are the entry the list holds of a slave (both are
// toSlaveJSON of the stored slave), read with one GetItem each rather than
// with the list's eight scans of the whole table (and its read of the feed),
// which every earlier test of the package has added slaves to.
func snapshot(t *testing.T, ids ...string) string {
	t.Helper()
	h := api(t, access.Policy{})
	exp := call(t, h, "GET", "/api/slaves/expiring", "")
	exp.want(t, 200, "*")
	records := map[string][]json.RawMessage{}
	for _, raw := range decode[[]json.RawMessage](t, exp.body) {
		id := decode[expiring](t, string(raw)).MachineID
		records[id] = append(records[id], raw)
	}
	var b strings.Builder
	for _, id := range ids {
		details := call(t, h, "GET", "/api/slaves/slave/"+pathID(id)+"/details", "")
		if details.status != 200 && details.status != 404 {
			t.Fatalf("%q: got details %d %s, want 200 or 404", id, details.status, details.body)
		}
		hist := call(t, h, "GET", "/api/slaves/slave/"+pathID(id), "")
		hist.want(t, 200, "*")
		fmt.Fprintf(&b, "%q: %d %s\nhistory %s\nexpiring %s\n", id, details.status, details.body, hist.body, records[id])
	}
	return b.String()
}

// unchanged fails when the slaves' snapshot is no longer before.
func unchanged(t *testing.T, before string, ids ...string) {
	t.Helper()
	if after := snapshot(t, ids...); after != before {
		t.Errorf("a refused request changed the slaves:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// wantJSONError checks a JSON error body {"code": status, "message": ...}
// whose message starts with prefix.
func (r response) wantJSONError(t *testing.T, status int, prefix string) {
	t.Helper()
	r.want(t, status, "*")
	var e web.ErrorBody
	if err := json.Unmarshal([]byte(r.body), &e); err != nil || e.Code != status || !strings.HasPrefix(e.Message, prefix) {
		t.Fatalf("got body %s, want {\"code\":%d,\"message\":\"%s...\"}", r.body, status, prefix)
	}
}

// everyRoute is each slave route, with the path of slave id.
func everyRoute(id string) [][2]string {
	p := "/api/slaves/slave/" + pathID(id)
	return [][2]string{
		{"POST", p + "/freeze"}, {"POST", p + "/decommission"}, {"POST", p + "/activate"},
		{"DELETE", p}, {"DELETE", p + "/expiring"}, {"DELETE", "/api/slaves/dead"},
		{"GET", "/api/slaves"}, {"GET", "/api/slaves/"}, {"GET", p + "/details"}, {"GET", p}, {"GET", "/api/slaves/expiring"},
	}
}

// hostileSlaves sets up the slaves that refused requests aim at: an ACTIVE
// slave with an expiring record, which a freeze, a decommission and both
// DELETEs would change (a frozen one would refuse a freeze anyway, hiding a
// freeze that got through), and a DEAD one, which every action and DELETE
// /api/slaves/dead would change.
func hostileSlaves(t *testing.T, prefix string) (active, dead string) {
	t.Helper()
	h := api(t, access.Policy{})
	active, dead = prefix+"-active", prefix+"-dead"
	reportUp(t, active, dead)
	call(t, h, "POST", "/api/slaves/slave/"+active+"/freeze", "").want(t, 200, "")
	call(t, h, "POST", "/api/slaves/slave/"+active+"/activate", `{"durationMillis":3600000,"revertToState":"FROZEN"}`).want(t, 200, "")
	if recs := listExpiring(t, h, active); len(recs) != 1 || state(t, h, active) != "ACTIVE" {
		t.Fatalf("setup: got %s with %+v, want ACTIVE with one expiring record", state(t, h, active), recs)
	}
	report(t, fmt.Sprintf(`{"machines":[{"id":%q,"host":"h","lost":true}]}`, dead))
	if got := state(t, h, dead); got != "DEAD" {
		t.Fatalf("setup: got %s, want DEAD", got)
	}
	return active, dead
}

func TestHostileOversizedBodiesAre413AndChangeNothing(t *testing.T) {
	h := api(t, access.Policy{})
	active, dead := hostileSlaves(t, "big")
	before := snapshot(t, active, dead)
	over := map[string]string{
		"a JSON message one byte over 64 KiB": `{"message":"` + strings.Repeat("x", web.MaxBody-len(`{"message":""}`)+1) + `"}`,
		"64 KiB of spaces and one more":       strings.Repeat(" ", web.MaxBody+1),
		"a megabyte that is not JSON":         strings.Repeat("\x00", 1<<20),
	}
	for name, body := range over {
		for _, route := range append(everyRoute(active), [2]string{"POST", "/api/slaves/slave/" + dead + "/freeze"}) {
			t.Run(name+" to "+route[0]+" "+route[1], func(t *testing.T) {
				call(t, h, route[0], route[1], body).wantError(t, 413, "request body is larger than 65536 bytes")
				if route[0] != "GET" { // reads have no way to write
					unchanged(t, before, active, dead)
				}
			})
		}
	}
	t.Run("a body of exactly 64 KiB is read", func(t *testing.T) {
		body := `{"message":"at the limit"}`
		body += strings.Repeat(" ", web.MaxBody-len(body))
		call(t, h, "POST", "/api/slaves/slave/"+dead+"/freeze", body).want(t, 200, "")
		if hist := history(t, h, dead); hist[0].State != "FROZEN" || hist[0].Message == nil || *hist[0].Message != "at the limit" {
			t.Errorf("got %+v, want the freeze with its message", hist[0])
		}
	})
}

func TestHostileDeeplyNestedBodiesAre400(t *testing.T) {
	h := api(t, access.Policy{})
	active, dead := hostileSlaves(t, "deep")
	before := snapshot(t, active, dead)
	nest := func(open, close string, n int) string { return strings.Repeat(open, n) + strings.Repeat(close, n) }
	tests := []struct {
		name, body, message string
		changesOnly         bool // the field is one of the change request only
	}{
		// encoding/json refuses nesting deeper than 10,000 levels.
		{"32,000 nested arrays (64,000 bytes)", nest("[", "]", 32000), "request body is not valid JSON: invalid character '[' exceeded max depth", false},
		{"65,536 arrays never closed", strings.Repeat("[", web.MaxBody), "request body is not valid JSON: invalid character '[' exceeded max depth", false},
		{"10,900 nested objects", nest(`{"a":`, "}", 10900), "request body is not valid JSON: invalid character '{' exceeded max depth", false},
		{"a field holding 20,000 nested arrays", `{"message":` + nest("[", "]", 20000) + `}`, "request body is not valid JSON: invalid character '[' exceeded max depth", false},
		{"10,000 nested arrays, within the decoder's depth", nest("[", "]", 10000), "request body must be a JSON object", false},
		{"a known field holding 9,000 nested arrays", `{"message":` + nest("[", "]", 9000) + `}`, "request body field message must be a string", true},
	}
	for _, tt := range tests {
		for _, route := range everyRoute(active) {
			if tt.changesOnly && route[0] != "POST" {
				continue // message is no field of the SchedulerUser body: ignored there
			}
			t.Run(tt.name+" to "+route[0]+" "+route[1], func(t *testing.T) {
				call(t, h, route[0], route[1], tt.body).wantError(t, 400, tt.message)
			})
		}
	}
	unchanged(t, before, active, dead)
	t.Run("100,000 nested arrays are over the size limit first", func(t *testing.T) {
		call(t, h, "POST", "/api/slaves/slave/"+dead+"/freeze", nest("[", "]", 100000)).wantError(t, 413, "request body is larger than 65536 bytes")
		unchanged(t, before, active, dead)
	})
	t.Run("an unknown field holding 9,000 nested arrays is ignored, as unknown fields are", func(t *testing.T) {
		call(t, h, "GET", "/api/slaves/slave/"+dead+"/details", `{"extra":`+nest("[", "]", 9000)+`}`).want(t, 200, "*")
		call(t, h, "POST", "/api/slaves/slave/"+dead+"/freeze", `{"message":"deep","extra":`+nest("[", "]", 9000)+`}`).want(t, 200, "")
		if got := state(t, h, dead); got != "FROZEN" {
			t.Errorf("got %s, want FROZEN", got)
		}
	})
}

func TestHostileWrongTypesAre400NamingTheField(t *testing.T) {
	h := api(t, access.Policy{})
	active, dead := hostileSlaves(t, "types")
	before := snapshot(t, active, dead)
	changes := []struct {
		name, body, message string
	}{
		{"durationMillis as a string", `{"durationMillis":"10","revertToState":"ACTIVE"}`, "request body field durationMillis must be a whole number"},
		{"durationMillis as a fraction", `{"durationMillis":1.5,"revertToState":"ACTIVE"}`, "request body field durationMillis must be a whole number"},
		{"durationMillis in exponent form", `{"durationMillis":1e3,"revertToState":"ACTIVE"}`, "request body field durationMillis must be a whole number"},
		{"durationMillis past int64", `{"durationMillis":9223372036854775808,"revertToState":"ACTIVE"}`, "request body field durationMillis must be a whole number"},
		{"durationMillis of 20 digits", `{"durationMillis":99999999999999999999,"revertToState":"ACTIVE"}`, "request body field durationMillis must be a whole number"},
		{"message as a number", `{"message":5}`, "request body field message must be a string"},
		{"message as an object", `{"message":{"text":"x"}}`, "request body field message must be a string"},
		{"killTasksOnDecommissionTimeout as a string", `{"killTasksOnDecommissionTimeout":"yes"}`, "request body field killTasksOnDecommissionTimeout must be a boolean"},
		{"killTasksOnDecommissionTimeout as 1", `{"killTasksOnDecommissionTimeout":1}`, "request body field killTasksOnDecommissionTimeout must be a boolean"},
		{"revertToState as a list", `{"durationMillis":1000,"revertToState":["ACTIVE"]}`, "request body field revertToState must be a string"},
		{"actionId as an object", `{"actionId":{}}`, "request body field actionId must be a string"},
		{"a JSON array", `[{"message":"x"}]`, "request body must be a JSON object"},
		{"an empty JSON array", `[]`, "request body must be a JSON object"},
		{"a JSON string", `"freeze"`, "request body must be a JSON object"},
		{"a JSON number", `5`, "request body must be a JSON object"},
		{"a JSON boolean", `true`, "request body must be a JSON object"},
		{"two JSON objects", `{"message":"a"} {"message":"b"}`, "request body is not valid JSON: "},
		{"an object never closed", `{"message":"a"`, "request body is not valid JSON: "},
		{"a quoted body", `'{"message":"a"}'`, "request body is not valid JSON: "},
	}
	for _, c := range changes {
		t.Run(c.name, func(t *testing.T) {
			for _, action := range []string{"freeze", "decommission", "activate"} {
				for _, id := range []string{active, dead} {
					r := call(t, h, "POST", "/api/slaves/slave/"+id+"/"+action, c.body)
					if strings.HasSuffix(c.message, ": ") {
						r.wantJSONError(t, 400, c.message)
					} else {
						r.wantError(t, 400, c.message)
					}
				}
			}
			unchanged(t, before, active, dead)
		})
	}
	// The other routes' optional body is a SchedulerUser.
	users := []struct {
		name, body, message string
	}{
		{"groups as a string", `{"id":"ops","groups":"admin"}`, "request body field groups must be an array"},
		{"groups holding a number", `{"id":"ops","groups":[1]}`, "request body field groups must be a string"},
		{"id as a number", `{"id":5}`, "request body field id must be a string"},
		{"authenticated as a string", `{"authenticated":"yes"}`, "request body field authenticated must be a boolean"},
		{"a JSON array", `[{"id":"ops"}]`, "request body must be a JSON object"},
		{"a JSON string", `"ops"`, "request body must be a JSON object"},
	}
	for _, u := range users {
		t.Run(u.name, func(t *testing.T) {
			for _, route := range everyRoute(active) {
				if route[0] != "POST" {
					call(t, h, route[0], route[1], u.body).wantError(t, 400, u.message)
				}
			}
			unchanged(t, before, active, dead)
		})
	}
}

func TestHostileSlaveIDsReachExactlyTheirSlave(t *testing.T) {
	h := api(t, access.Policy{})
	// Ids an agent may have (the inventory refuses only '/', NUL, line
	// breaks, tabs and a leading '#'), and look-alikes that must stay apart.
	ids := []string{"nöde-1", "node-1", "ノード-1", "é", "e", "🚀-1", "..", ".", "a%2Fb", "a", "b", "a b"}
	reportUp(t, ids...)
	everyone := func() string { return snapshot(t, ids...) }

	t.Run("an encoded id reaches the decoded id, once decoded", func(t *testing.T) {
		for path, want := range map[string]string{
			"/api/slaves/slave/n%C3%B6de-1/details":                   "nöde-1",
			"/api/slaves/slave/nöde-1/details":                        "nöde-1",
			"/api/slaves/slave/%E3%83%8E%E3%83%BC%E3%83%89-1/details": "ノード-1",
			"/api/slaves/slave/%C3%A9/details":                        "é",
			"/api/slaves/slave/%F0%9F%9A%80-1/details":                "🚀-1",
			"/api/slaves/slave/%2e%2e/details":                        "..",
			"/api/slaves/slave/%2E%2E/details":                        "..",
			"/api/slaves/slave/.%2e/details":                          "..",
			"/api/slaves/slave/%2e/details":                           ".",
			"/api/slaves/slave/a%252Fb/details":                       "a%2Fb",
			"/api/slaves/slave/a%20b/details":                         "a b",
		} {
			r := call(t, h, "GET", path, "")
			r.want(t, 200, "*")
			if got := decode[slave](t, r.body); got.ID != want || got.CurrentState.ObjectID != want {
				t.Errorf("%s: got slave %q, want %q", path, got.ID, want)
			}
		}
	})
	t.Run("freeze and activate by encoded path change only that slave", func(t *testing.T) {
		for _, id := range []string{"nöde-1", "ノード-1", "é", "🚀-1", "..", ".", "a%2Fb", "a b"} {
			var rest []string
			for _, o := range ids {
				if o != id {
					rest = append(rest, o)
				}
			}
			before := snapshot(t, rest...)
			call(t, h, "POST", "/api/slaves/slave/"+pathID(id)+"/freeze", `{"message":"frozen by path"}`).want(t, 200, "")
			unchanged(t, before, rest...)
			if got := state(t, h, pathID(id)); got != "FROZEN" {
				t.Errorf("%q: got %s, want FROZEN", id, got)
			}
			hist := history(t, h, pathID(id))
			if hist[0].ObjectID != id || hist[0].State != "FROZEN" {
				t.Errorf("%q: got newest entry %+v, want the freeze of %q", id, hist[0], id)
			}
			call(t, h, "POST", "/api/slaves/slave/"+pathID(id)+"/activate", "").want(t, 200, "")
			if got := state(t, h, pathID(id)); got != "ACTIVE" {
				t.Errorf("%q: got %s, want ACTIVE", id, got)
			}
		}
	})
	t.Run("ids that name no slave are JSON 404s that change nothing", func(t *testing.T) {
		before := everyone()
		for _, p := range []string{
			"a%2Fb",              // "a/b": an encoded slash stays inside the id
			"n%25C3%25B6de-1",    // "n%C3%B6de-1": decoded once, not twice
			"no%CC%88de-1",       // "nöde-1" decomposed (NFD) is another id
			"NÖDE-1",             // ids are case sensitive
			"%00",                // NUL
			"%2e%2e%2fa",         // "../a"
			"..%2F..%2Fa",        // "../../a"
			"%2e%2e%5Ca",         // "..\a"
			"%23decommissioning", // the store's own item in the slaves table
			"%23",
			strings.Repeat("x", 300),
		} {
			path := "/api/slaves/slave/" + p
			call(t, h, "GET", path+"/details", "").wantJSONError(t, 404, "Couldn't find an active Slave with id ")
			call(t, h, "GET", path, "").want(t, 200, "[]")
			for _, action := range []string{"freeze", "decommission", "activate"} {
				call(t, h, "POST", path+"/"+action, "").wantJSONError(t, 404, "Couldn't find an active Slave with id ")
			}
			call(t, h, "DELETE", path, "").wantJSONError(t, 404, "Couldn't find dead Slave with id ")
			call(t, h, "DELETE", path+"/expiring", "").want(t, 200, "")
		}
		unchanged(t, before, ids...)
	})
	t.Run("path navigation is a JSON 404, never a redirect", func(t *testing.T) {
		before := everyone()
		for _, route := range [][2]string{
			{"GET", "/api/slaves/slave/../details"},
			{"GET", "/api/slaves/slave/./details"},
			{"GET", "/api/slaves/slave/.."},
			{"POST", "/api/slaves/slave/../freeze"},
			{"POST", "/api/slaves/slave/./freeze"},
			{"POST", "/api/slaves/slave/a/../freeze"},
			{"POST", "/api/slaves/slave/node-1/../../slave/node-1/freeze"},
			{"DELETE", "/api/slaves/slave/.."},
			{"DELETE", "/api/slaves/slave/../dead"},
			{"DELETE", "/api/slaves/slave/a/.."},
			{"DELETE", "/api/slaves//dead"},
			{"POST", "/api/slaves/slave//freeze"},
			{"GET", "//api/slaves"},
			{"POST", "/api/slaves/slave/a/b/freeze"},
			{"POST", "/api/slaves/slave/node-1/freeze/"},
			{"PUT", "/api/slaves/slave/node-1/freeze"},
			{"PATCH", "/api/slaves/slave/node-1/activate"},
			{"GET", "/api/slaves/slave/node-1/freeze"},
			{"POST", "/api/slaves/slave/node-1"},
		} {
			r := call(t, h, route[0], route[1], "")
			if r.status != 404 || r.header.Get("Location") != "" || !strings.HasPrefix(r.body, `{"code":404,"message":`) {
				t.Errorf("%s %s: got %d %s (Location %q), want a JSON 404", route[0], route[1], r.status, r.body, r.header.Get("Location"))
			}
		}
		unchanged(t, before, ids...)
	})
	// DynamoDB refuses a partition key over 2,048 bytes; moto checks that
	// only on writes, so this passes here whether or not the handler keeps
	// such ids away from DynamoDB.
	t.Run("an id longer than DynamoDB's key limit is a 404, not a 5xx", func(t *testing.T) {
		before := everyone()
		long := strings.Repeat("x", 2100)
		call(t, h, "GET", "/api/slaves/slave/"+long+"/details", "").wantJSONError(t, 404, "Couldn't find an active Slave with id ")
		call(t, h, "GET", "/api/slaves/slave/"+long, "").want(t, 200, "[]")
		call(t, h, "POST", "/api/slaves/slave/"+long+"/freeze", "").wantJSONError(t, 404, "Couldn't find an active Slave with id ")
		call(t, h, "DELETE", "/api/slaves/slave/"+long, "").wantJSONError(t, 404, "Couldn't find dead Slave with id ")
		unchanged(t, before, ids...)
	})
	t.Run("the store's own item is no slave to list or delete", func(t *testing.T) {
		r := call(t, h, "GET", "/api/slaves", "")
		r.want(t, 200, "*")
		for _, s := range decode[[]slave](t, r.body) {
			if strings.HasPrefix(s.ID, "#") {
				t.Errorf("got %q in the list", s.ID)
			}
		}
	})
}

// Field names match exactly: a field in another case is an unknown field,
// ignored, never an alias that could add to or override the real one.
func TestHostileFieldNamesInAnotherCaseAreUnknown(t *testing.T) {
	h := api(t, access.Policy{})
	t.Run("DURATIONMILLIS alone makes a plain freeze, with no expiring record", func(t *testing.T) {
		id := "case-duration"
		reportUp(t, id)
		call(t, h, "POST", "/api/slaves/slave/"+id+"/freeze", `{"DURATIONMILLIS":5000}`).want(t, 200, "")
		if got := state(t, h, id); got != "FROZEN" {
			t.Errorf("got %s, want FROZEN", got)
		}
		if recs := listExpiring(t, h, id); len(recs) != 0 {
			t.Errorf("got expiring records %+v, want none", recs)
		}
	})
	t.Run("MESSAGE cannot override message in history", func(t *testing.T) {
		id := "case-message"
		reportUp(t, id)
		call(t, h, "POST", "/api/slaves/slave/"+id+"/freeze", `{"message":"real","MESSAGE":"shadow"}`).want(t, 200, "")
		if hist := history(t, h, id); hist[0].Message == nil || *hist[0].Message != "real" {
			t.Errorf("got newest history entry %+v, want message real", hist[0])
		}
	})
	t.Run("capitalized names of a change request are ignored, the exact ones are kept", func(t *testing.T) {
		id := "case-expiring"
		reportUp(t, id)
		call(t, h, "POST", "/api/slaves/slave/"+id+"/freeze",
			`{"durationMillis":60000,"revertToState":"ACTIVE","DurationMillis":1,"RevertToState":"DECOMMISSIONED","Message":"shadow"}`).want(t, 200, "")
		recs := listExpiring(t, h, id)
		if len(recs) != 1 || recs[0].RevertToState != "ACTIVE" || recs[0].Request["durationMillis"] != 60000.0 || recs[0].Request["message"] != nil {
			t.Errorf("got expiring records %+v, want one reverting to ACTIVE after 60000 ms, with no message", recs)
		}
	})
	t.Run("the type of a field in another case is never checked", func(t *testing.T) {
		id := "case-types"
		reportUp(t, id)
		call(t, h, "POST", "/api/slaves/slave/"+id+"/freeze", `{"DurationMillis":"soon","MESSAGE":7,"message":"typed"}`).want(t, 200, "")
		if hist := history(t, h, id); hist[0].Message == nil || *hist[0].Message != "typed" {
			t.Errorf("got newest history entry %+v, want message typed", hist[0])
		}
	})
}
