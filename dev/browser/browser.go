// Package browser drives a headless Chromium for the console's browser
// tests and its benchmark figures: Debian's chromium (CHROMIUM names
// another binary), a fresh profile each time, and the flags that keep it
// from talking to anything but the page under test.
package browser

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// Path returns the Chromium binary: $CHROMIUM, else chromium or
// chromium-browser on PATH.
func Path() (string, error) {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("chromium is not installed: apt-get install chromium (make test installs it)")
}

// Browser is one running Chromium with its own profile.
type Browser struct {
	ctx     context.Context
	cancel  func()
	profile string
}

// Start starts Chromium. Close stops it and removes its profile.
func Start(ctx context.Context) (*Browser, error) {
	path, err := Path()
	if err != nil {
		return nil, err
	}
	profile, err := os.MkdirTemp("", "fleet-chromium-")
	if err != nil {
		return nil, err
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(profile),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
		chromedp.WindowSize(1440, 900),
		// A deadline sized for a loaded machine: on 2 CPUs at load 12,
		// Chromium took longer than chromedp's 20 s to say where its
		// DevTools listen, and make bench stopped at the console.
		chromedp.WSURLReadTimeout(2 * time.Minute),
	}
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	// chromedp reports the DOM events of newer Chromium releases that it
	// does not know; they are noise, everything else is said.
	bctx, bcancel := chromedp.NewContext(actx, chromedp.WithErrorf(func(format string, args ...any) {
		if msg := fmt.Sprintf(format, args...); !strings.Contains(msg, "unhandled node event") && !strings.Contains(msg, "unhandled page event") {
			log.Print(msg)
		}
	}))
	if err := chromedp.Run(bctx); err != nil { // starts the browser
		bcancel()
		acancel()
		os.RemoveAll(profile)
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	return &Browser{ctx: bctx, cancel: func() { bcancel(); acancel() }, profile: profile}, nil
}

// Tab opens a new tab; cancel closes it. Tabs share the profile's storage.
func (b *Browser) Tab() (context.Context, context.CancelFunc) {
	return chromedp.NewContext(b.ctx)
}

// Close stops Chromium and removes its profile.
func (b *Browser) Close() {
	b.cancel()
	os.RemoveAll(b.profile)
}

// Look sets the tab's viewport width and color scheme ("light" or "dark").
func Look(width int64, scheme string) chromedp.Action {
	return chromedp.Tasks{
		chromedp.EmulateViewport(width, 900),
		emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}),
	}
}

// Screenshot saves what the window shows as a PNG at path.
func Screenshot(path string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		var png []byte
		if err := chromedp.CaptureScreenshot(&png).Do(ctx); err != nil {
			return err
		}
		return os.WriteFile(path, png, 0o644)
	})
}
