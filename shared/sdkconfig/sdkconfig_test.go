package sdkconfig

import (
	"testing"
	"time"
)

func TestRetryerTriesThreeTimesWithShortPauses(t *testing.T) {
	r := Retryer()
	if got := r.MaxAttempts(); got != MaxAttempts {
		t.Errorf("got %d attempts, want %d", got, MaxAttempts)
	}
	for attempt := 1; attempt <= 20; attempt++ {
		for range 100 {
			d, err := r.RetryDelay(attempt, nil)
			if err != nil || d <= 0 || d > maxBackoff+time.Millisecond {
				t.Fatalf("attempt %d: got pause %v (%v), want in (0, %v]", attempt, d, err, maxBackoff+time.Millisecond)
			}
		}
	}
}

// The worst case of one call must leave the API time to answer: API Gateway
// gives up after 29 s and the slave and log functions after 20 s.
func TestWorstCaseOfOneCallFitsTheDeadlines(t *testing.T) {
	for _, attempt := range []time.Duration{DynamoDBAttemptTimeout, S3AttemptTimeout} {
		worst := MaxAttempts*attempt + (MaxAttempts-1)*maxBackoff
		if worst > 10*time.Second {
			t.Errorf("got worst case %v per call, want at most 10 s", worst)
		}
	}
}
