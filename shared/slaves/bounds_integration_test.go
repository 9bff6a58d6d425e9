//go:build integration

package slaves_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/slaves"
)

func TestLongMessagesAndBoundedHistoryThroughDynamoDB(t *testing.T) {
	h := api(t, access.Policy{})
	id := seed(t, "bounded", 1)[0]
	longest := strings.Repeat(`<"\`, slaves.MaxMessage/3) + "<"
	for i, action := range []string{"freeze", "activate", "freeze", "activate"} {
		body, _ := json.Marshal(map[string]string{"message": longest[:len(longest)-i]})
		call(t, h, "POST", "/api/slaves/slave/"+id+"/"+action, string(body)).want(t, 200, "")
	}
	tooLong, _ := json.Marshal(map[string]string{"message": longest + "x"})
	call(t, h, "POST", "/api/slaves/slave/"+id+"/freeze", string(tooLong)).wantError(t, 400, "message must be at most 4096 characters")

	all := history(t, h, id)
	if len(all) != 5 || *all[0].Message != longest[:len(longest)-3] || all[0].State != "ACTIVE" {
		t.Fatalf("got %d entries, the newest %s, want 5 with the last change's message first", len(all), all[0].State)
	}
	r := call(t, h, "GET", "/api/slaves/slave/"+id+"?limit=2", "")
	r.want(t, 200, "*")
	if got := decode[[]update](t, r.body); len(got) != 2 || *got[1].Message != *all[1].Message {
		t.Errorf("got %d entries, want the newest 2", len(got))
	}
	call(t, h, "GET", "/api/slaves/slave/"+id+"?limit=0", "").wantError(t, 400, "query param limit must be a whole number from 1 to 10000")
}
