package dynamo

import "testing"

func TestScanSegmentsGrowWithTheFleetUpToEight(t *testing.T) {
	for listed, want := range map[int64]int{-1: 8, 0: 1, 12: 1, 3000: 1, 3001: 2, 12_000: 4, 100_000: 8, 10_000_000: 8} {
		if got := scanSegments(listed); got != want {
			t.Errorf("scanSegments(%d) = %d, want %d", listed, got, want)
		}
	}
}
