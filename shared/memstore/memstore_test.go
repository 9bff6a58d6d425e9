package memstore_test

import (
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/memstore"
	"github.com/fleetops/fleet/shared/storetest"

	"pgregory.net/rapid"
)

func TestStoreKeepsTheContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, historyRetention time.Duration) storetest.Store {
		return memstore.New(historyRetention)
	})
}

func TestAFollowerThatListsThenFollowsTheFeedEndsEqualToTheList(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		storetest.FeedModel(t, memstore.New(0), "")
	})
}
