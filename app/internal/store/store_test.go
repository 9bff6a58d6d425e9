package store

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/config"
)

// What can be wrong with the SDK's environment is found at init, as it was
// before the client was built on first use: Lambda reports the init failed,
// with the function's log line naming the variable.
func TestSlavesRefusesAnSDKEnvironmentWithoutRegionOrCredentials(t *testing.T) {
	cfg := config.Slaves{DynamoDBAttemptTimeout: time.Second}
	for _, tc := range []struct {
		name, unset, want string
	}{
		{"no region", "AWS_REGION", "AWS_REGION"},
		{"no access key", "AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY_ID"},
		{"no secret key", "AWS_SECRET_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("AWS_REGION", "us-east-1")
			t.Setenv("AWS_DEFAULT_REGION", "")
			t.Setenv("AWS_ACCESS_KEY_ID", "key")
			t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
			t.Setenv(tc.unset, "")
			if _, err := Slaves(context.Background(), cfg, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error naming %s", err, tc.want)
			}
		})
	}
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "key")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	if _, err := Slaves(context.Background(), cfg, nil); err != nil {
		t.Errorf("with a region and credentials: got %v, want a store", err)
	}
}
