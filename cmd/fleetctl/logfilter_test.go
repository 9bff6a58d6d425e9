package main

import (
	"testing"

	"github.com/fleetops/fleet/shared/logkey"
)

// fleetctl reads the host out of a task id on its own, since a client
// imports nothing of the server; it must find the host the service's own
// parser finds, and none where the service sees no task id.
func TestTaskHostAgreesWithTheServicesTaskIDs(t *testing.T) {
	for _, id := range []string{
		"web-api-d1-1763702040000-1-node7-rack1",
		"r-d-1-2-h-k",
		"a--b-d-1-2-h-k",
		"req-dep-17-3-host.example.com-us-east-1a",
		"d-1-2-h-k",
		"-d-1-2-h-k",
		"r-d-x1-2-h-k",
		"r-d-1-+2-h-k",
		"r-d-1-2--k",
		"r-d-1-2-h-",
		"r--1-2-h-k",
		"",
		"stdout",
	} {
		want, err := logkey.ParseTaskID(id)
		host, ok := taskHost(id)
		if ok != (err == nil) || ok && host != want.Host {
			t.Errorf("taskHost(%q) = %q, %v; the service parses %+v, %v", id, host, ok, want, err)
		}
	}
}
