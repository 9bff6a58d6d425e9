package client

import (
	"context"
	"net/http"
	"testing"
)

// A raw read answers the JSON as it came, a field the wire types lack
// included, from the route the typed read uses (the list: as the old API
// spells it).
func TestRawReadsKeepWhatTheWireTypesDoNotKnow(t *testing.T) {
	body := `{"id":"s1","unknownToTheClient":true}`
	s := &script{}
	for range 3 {
		s.answers = append(s.answers, status(200, "", body))
	}
	c, _ := newTest(t, s, Options{})
	ctx := context.Background()
	for _, read := range []func() (string, error){
		func() (string, error) { raw, err := c.GetSlaveRaw(ctx, "a/b"); return string(raw), err },
		func() (string, error) { raw, err := c.ListSlavesRaw(ctx, "FROZEN"); return string(raw), err },
		func() (string, error) {
			raw, err := c.GetTaskLogsRaw(ctx, "t", LogQuery{ListOnly: true})
			return string(raw), err
		},
	} {
		if got, err := read(); err != nil || got != body {
			t.Errorf("got %q (%v), want %q", got, err, body)
		}
	}
	var targets []string
	for _, r := range s.requests {
		if r.Method != http.MethodGet {
			t.Errorf("got %s %s, want a GET", r.Method, r.URL)
		}
		targets = append(targets, r.URL.RequestURI())
	}
	want := []string{"/api/slaves/slave/a%2Fb/details", "/api/slaves/?state=FROZEN", "/api/logs/task/t?list=true"}
	for i := range want {
		if i >= len(targets) || targets[i] != want[i] {
			t.Errorf("got requests %q, want %q", targets, want)
			break
		}
	}
}
