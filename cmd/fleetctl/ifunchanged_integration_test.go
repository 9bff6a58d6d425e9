//go:build integration

package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/fleetops/fleet/client"
	"github.com/fleetops/fleet/dev/apitest"
)

// meanwhile serves the API through a proxy that runs change once, after
// the first list of the slaves is read and before fleetctl receives it:
// another operator's change landing between fleetctl's read and its own.
func meanwhile(t *testing.T, change func(*client.Client) error) string {
	t.Helper()
	api, err := url.Parse(servers[apitest.None].URL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(client.Options{Endpoint: api.String()})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	proxy := httputil.NewSingleHostReverseProxy(api)
	proxy.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Method == http.MethodGet && strings.TrimSuffix(resp.Request.URL.Path, "/") == "/api/slaves" {
			once.Do(func() {
				if err := change(c); err != nil {
					t.Errorf("the other operator's change: %v", err)
				}
			})
		}
		return nil
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	return srv.URL
}

// --if-unchanged changes and deletes a machine only as fleetctl read it:
// one another operator changed meanwhile is said to have moved, with where
// it is now, kept as the other operator left it, and the exit code is 3.
func TestIfUnchangedLeavesAMachineThatMovedSinceItWasRead(t *testing.T) {
	machines(t, "ifu-1", "ifu-2", "ifu-3", "ifu-4")
	ctx := context.Background()
	endpoint := meanwhile(t, func(c *client.Client) error {
		return c.FreezeSlave(ctx, "ifu-2", client.ChangeRequest{Message: "the other operator"}, client.ChangeOptions{})
	})
	res := fleetctl(t, apitest.None, []string{"FLEETCTL_ENDPOINT=" + endpoint}, "freeze", "ifu-1", "ifu-2", "--if-unchanged", "--yes", "-m", "patch")
	res.want(t, exitRefused)
	if !strings.Contains(res.stdout, "ifu-1: FROZEN") || !strings.Contains(res.stderr, "ifu-2") ||
		!strings.Contains(res.stderr, "moved since read (412)") || !strings.Contains(res.stderr, "in state FROZEN") {
		t.Errorf("got stdout %q, stderr %q: want ifu-1 frozen and ifu-2 said to have moved, FROZEN now", res.stdout, res.stderr)
	}
	c, err := client.New(client.Options{Endpoint: servers[apitest.None].URL})
	if err != nil {
		t.Fatal(err)
	}
	if h, err := c.GetSlaveHistory(ctx, "ifu-2", 1); err != nil || len(h) != 1 || h[0].Message != "the other operator" {
		t.Errorf("ifu-2's last entry: %+v (%v), want the other operator's freeze, not fleetctl's", h, err)
	}

	endpoint = meanwhile(t, func(c *client.Client) error {
		return c.FreezeSlave(ctx, "ifu-4", client.ChangeRequest{}, client.ChangeOptions{})
	})
	res = fleetctl(t, apitest.None, []string{"FLEETCTL_ENDPOINT=" + endpoint}, "delete", "ifu-3", "ifu-4", "--if-unchanged", "--yes")
	res.want(t, exitRefused)
	if _, err := c.GetSlave(ctx, "ifu-3"); !client.IsNotFound(err) {
		t.Errorf("ifu-3: %v, want it deleted", err)
	}
	if s, err := c.GetSlave(ctx, "ifu-4"); err != nil || s.CurrentState.State != client.Frozen {
		t.Errorf("ifu-4: %+v (%v), want it kept, FROZEN", s, err)
	}
}
