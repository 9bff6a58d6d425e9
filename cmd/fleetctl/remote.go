package main

import (
	"context"
	"net/url"

	"github.com/spf13/pflag"

	"github.com/fleetops/fleet/client"
)

// remote returns a client of another API than the one in effect, for the
// commands that speak to two (import --from, diff --old --new). where is
// either a base URL, spoken to with the authentication in effect, or the
// name of a profile of the config file, whose endpoint and authentication
// are used as they are, whatever the flags and FLEETCTL_ variables say
// about the API in effect. It returns the client and the endpoint it
// speaks to.
func (a *app) remote(ctx context.Context, where string) (*client.Client, string, error) {
	s := *a.settings
	if u, err := url.Parse(where); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		named, err := a.profileSettings(where)
		if err != nil {
			return nil, "", err
		}
		s = *named
	} else {
		s.endpoint = where
	}
	c, err := s.client(ctx, client.Options{AttemptTimeout: s.timeout / 2, CallTimeout: s.timeout, OnRetry: a.retrying})
	if err != nil {
		return nil, "", err
	}
	return c, s.endpoint, nil
}

// profileSettings resolves the named profile of the config file in effect
// alone: no flag and no FLEETCTL_ variable takes part.
func (a *app) profileSettings(name string) (*settings, error) {
	flags := pflag.NewFlagSet("profile", pflag.ContinueOnError)
	var g globalFlags
	g.registerOn(flags)
	if err := flags.Parse([]string{"--profile=" + name, "--config=" + a.settings.configPath}); err != nil {
		return nil, usageError("%v", err)
	}
	s, err := resolve(g, flags, func(string) string { return "" })
	if err != nil {
		return nil, usageError("%q is neither an http(s) URL nor a usable profile: %v", name, message(err))
	}
	return s, nil
}
