package logs_test

import "testing"

func TestASearchBodyThatIsNotUTF8IsA400(t *testing.T) {
	f := newRecordingStore()
	body := "{\"taskIds\":[\"" + taskID + "\"],\"fileNamePrefixAllowlist\":[\"caf\xe9\"]}"
	serve(t, handler(t, f, settings("logs")), "POST", "/api/logs/search", body).wantError(t, 400, "request body is not valid UTF-8")
	f.untouched(t)
}
