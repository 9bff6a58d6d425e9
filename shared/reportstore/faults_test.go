package reportstore_test

import (
	"context"
	"testing"

	"github.com/fleetops/fleet/shared/awsfault"
	"github.com/fleetops/fleet/shared/awsfault/awsfaulttest"
	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/reportstore"
)

// A refused connection, a throttle (SlowDown), a server error and a
// timeout give report objects the faults every adapter gives them
// (shared/awsfault), where they were once plain errors.
func TestEveryFailureOfS3AnswersAsTheOthers(t *testing.T) {
	for _, f := range awsfaulttest.Failures(t, awsfault.S3) {
		t.Run(f.Name, func(t *testing.T) {
			ctx := context.Background()
			store := reportstore.New(awsfaulttest.S3Client(t, f))
			if _, err := store.Open(ctx, "reports", "reports/r1.json"); fault.Message(err) != f.Message {
				t.Errorf("Open: got %q (%v), want %q", fault.Message(err), err, f.Message)
			}
			if err := store.Put(ctx, "reports", "parts/r1/0.json", []byte("{}")); fault.Message(err) != f.Message {
				t.Errorf("Put: got %q (%v), want %q", fault.Message(err), err, f.Message)
			}
		})
	}
}
