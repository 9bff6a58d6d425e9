package localapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// getenv is an environment the three functions start with; no request of
// these tests reaches a backend.
func getenv(string) (func(string) string, error) {
	vars := map[string]string{
		"SLAVES_TABLE": "slaves", "HISTORY_TABLE": "history", "EXPIRING_TABLE": "expiring", "REQUESTS_TABLE": "requests", "CHANGES_TABLE": "changes",
		"LOG_BUCKETS": "task-logs", "LOG_INDEX": "false", "AUTH_MODE": "none",
	}
	return func(name string) string { return vars[name] }, nil
}

// unused are clients no request of these tests calls.
var unused = struct {
	db *dynamodb.Client
	s3 *s3.Client
}{dynamodb.New(dynamodb.Options{Region: "us-east-1"}), s3.New(s3.Options{Region: "us-east-1"})}

func TestTheAssemblyServesTheConsoleAndTheDescriptionOnlyWhenAsked(t *testing.T) {
	for _, tc := range []struct {
		name              string
		opts              Options
		root, description int
	}{
		{"the API alone answers 404 beside its routes", Options{Env: getenv, DynamoDB: unused.db, S3: unused.s3}, http.StatusNotFound, http.StatusNotFound},
		{"make run's serves the console and the description", Options{Env: getenv, DynamoDB: unused.db, S3: unused.s3, Console: true, Document: true}, http.StatusOK, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := New(context.Background(), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			for path, want := range map[string]int{"/": tc.root, "/api/openapi.json": tc.description} {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
				if rec.Code != want {
					t.Errorf("GET %s: got %d, want %d", path, rec.Code, want)
				}
				if want == http.StatusNotFound && !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
					t.Errorf("GET %s: got Content-Type %q, want the API's JSON error", path, rec.Header().Get("Content-Type"))
				}
			}
		})
	}
}

func TestTheAssemblyRoutesEachPathToItsFunction(t *testing.T) {
	h, err := New(context.Background(), Options{Env: getenv, DynamoDB: unused.db, S3: unused.s3})
	if err != nil {
		t.Fatal(err)
	}
	// A request each function refuses before any backend call, in its own
	// words; the API's 404 would be another answer.
	for _, tc := range []struct{ method, path, body, says string }{
		{"POST", "/api/slaves/slave/x/freeze", "not json", "request body is not valid JSON"},
		{"GET", "/api/logs/task/not-a-task-id", "", "not a valid task id"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body)))
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), tc.says) {
			t.Errorf("%s %s: got %d %s, want 400 saying %q", tc.method, tc.path, rec.Code, rec.Body, tc.says)
		}
	}
}
