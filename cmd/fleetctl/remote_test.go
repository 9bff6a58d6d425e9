package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The other API of import --from and diff --old --new: a URL keeps the
// authentication in effect, a profile brings its own, and neither the
// flags nor the FLEETCTL_ variables of the API in effect leak into a
// profile's.
func TestARemoteIsAURLWithTheAuthInEffectOrAProfileOfItsOwn(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte("profiles:\n  old:\n    endpoint: http://old.example.com:8080\n    auth: bearer\n    token: old-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := &app{settings: &settings{endpoint: "http://new.example.com", auth: "bearer", token: "new-token", authHeader: "Authorization", timeout: time.Minute, configPath: cfg}}
	ctx := context.Background()

	_, at, err := a.remote(ctx, "https://other.example.com/base")
	if err != nil || at != "https://other.example.com/base" {
		t.Errorf("a URL: got %q, %v", at, err)
	}
	named, err := a.profileSettings("old")
	if err != nil {
		t.Fatal(err)
	}
	if named.endpoint != "http://old.example.com:8080" || named.token != "old-token" || named.auth != "bearer" {
		t.Errorf("profile old: got endpoint %q, auth %q, token %q", named.endpoint, named.auth, named.token)
	}
	if _, _, err := a.remote(ctx, "missing"); err == nil || !strings.Contains(err.Error(), "neither an http(s) URL nor a usable profile") {
		t.Errorf("an unknown profile: got %v", err)
	}
	if _, _, err := a.remote(ctx, "ftp://old.example.com"); err == nil {
		t.Error("an ftp URL was taken as an API")
	}
}
