package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/fleetops/fleet/client"
)

// defaultEndpoint is make run's address.
const defaultEndpoint = "http://127.0.0.1:3000"

// globalFlags are the flags every command takes.
type globalFlags struct {
	endpoint, profile, auth, token, authHeader, region, awsProfile, config, cacheDir string
	headers                                                                          []string
	timeout                                                                          time.Duration
	noColor                                                                          bool
}

func (g *globalFlags) register(root *cobra.Command) {
	g.registerOn(root.PersistentFlags())
}

func (g *globalFlags) registerOn(f *pflag.FlagSet) {
	f.StringVar(&g.endpoint, "endpoint", "", "API base URL (env FLEETCTL_ENDPOINT; default "+defaultEndpoint+", make run)")
	f.StringVarP(&g.profile, "profile", "p", "", "profile of the config file (env FLEETCTL_PROFILE)")
	f.StringVar(&g.auth, "auth", "", "authentication: none, bearer or sigv4 (env FLEETCTL_AUTH)")
	f.StringVar(&g.token, "token", "", "bearer token (env FLEETCTL_TOKEN)")
	f.StringVar(&g.authHeader, "auth-header", "", "the header the bearer token goes in, the stack's AuthHeader (env FLEETCTL_AUTH_HEADER; default Authorization)")
	f.StringVar(&g.region, "region", "", "AWS region for sigv4 (env FLEETCTL_REGION; default the AWS profile's)")
	f.StringVar(&g.awsProfile, "aws-profile", "", "AWS shared-config profile for sigv4 credentials (env FLEETCTL_AWS_PROFILE)")
	f.StringArrayVarP(&g.headers, "header", "H", nil, `extra request header "Name: value", repeatable (env FLEETCTL_HEADERS, separated by ";")`)
	f.StringVar(&g.config, "config", "", "config file (env FLEETCTL_CONFIG; default "+displayPath(defaultConfigPath())+")")
	f.StringVar(&g.cacheDir, "cache-dir", "", "where logs fetch keeps logs, import its checkpoints beside it in imports (env FLEETCTL_CACHE_DIR; default "+displayPath(defaultCacheDir())+")")
	f.DurationVar(&g.timeout, "timeout", 0, "time limit of one API call, its retries included (env FLEETCTL_TIMEOUT; default 30s); also how long a log download may wait for an answer")
	f.BoolVar(&g.noColor, "no-color", false, "no colour even on a terminal (also NO_COLOR)")
}

// profile is one named profile of the config file.
type profile struct {
	Endpoint   string            `yaml:"endpoint"`
	Auth       string            `yaml:"auth"`
	Token      string            `yaml:"token"`
	AuthHeader string            `yaml:"authHeader"`
	Region     string            `yaml:"region"`
	AWSProfile string            `yaml:"awsProfile"`
	Headers    map[string]string `yaml:"headers"`
	CacheDir   string            `yaml:"cacheDir"`
	Timeout    string            `yaml:"timeout"`
}

// configFile is the config file: named profiles, and the one used when
// none is named.
type configFile struct {
	Default  string             `yaml:"default"`
	Profiles map[string]profile `yaml:"profiles"`
}

// setting is one value in effect and where it came from.
type setting struct {
	name, value, source string
}

// settings are the values in effect for a command.
type settings struct {
	endpoint, auth, token, authHeader, region, awsProfile, cacheDir, profile, configPath string
	headers                                                                              http.Header
	timeout                                                                              time.Duration
	noColor                                                                              bool
	shown                                                                                []setting // for fleetctl config
}

func defaultConfigPath() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "fleetctl.yaml"
	}
	return filepath.Join(dir, "fleetctl", "config.yaml")
}

func defaultCacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ".fleetctl-cache"
	}
	return filepath.Join(dir, "fleetctl", "logs")
}

// displayPath shortens a path under the home directory to ~/...
func displayPath(p string) string {
	if home, err := os.UserHomeDir(); err == nil && strings.HasPrefix(p, home+string(filepath.Separator)) {
		return "~" + p[len(home):]
	}
	return p
}

// resolve reads the settings in effect: a flag given on the command line,
// else its FLEETCTL_ variable, else the profile's value, else the default.
func resolve(g globalFlags, flags *pflag.FlagSet, getenv func(string) string) (*settings, error) {
	s := &settings{}
	pick := func(name, flagName, flagValue, env, fromProfile, def string) string {
		switch {
		case flags.Changed(flagName):
			s.shown = append(s.shown, setting{name, flagValue, "flag --" + flagName})
			return flagValue
		case env != "" && getenv(env) != "":
			s.shown = append(s.shown, setting{name, getenv(env), "env " + env})
			return getenv(env)
		case fromProfile != "":
			s.shown = append(s.shown, setting{name, fromProfile, "profile " + s.profile})
			return fromProfile
		}
		s.shown = append(s.shown, setting{name, def, "default"})
		return def
	}

	s.configPath = pick("config", "config", g.config, "FLEETCTL_CONFIG", "", defaultConfigPath())
	file, err := readConfig(s.configPath, flags.Changed("config") || getenv("FLEETCTL_CONFIG") != "")
	if err != nil {
		return nil, err
	}
	s.profile = pick("profile", "profile", g.profile, "FLEETCTL_PROFILE", file.Default, "")
	if s.profile != "" && s.profile == file.Default && !flags.Changed("profile") && getenv("FLEETCTL_PROFILE") == "" {
		s.shown[len(s.shown)-1].source = "config file default"
	}
	var p profile
	if s.profile != "" {
		var ok bool
		if p, ok = file.Profiles[s.profile]; !ok {
			return nil, usageError("no profile %q in %s (profiles: %s)", s.profile, s.configPath, strings.Join(sortedKeys(file.Profiles), ", "))
		}
	}
	s.endpoint = pick("endpoint", "endpoint", g.endpoint, "FLEETCTL_ENDPOINT", p.Endpoint, defaultEndpoint)
	s.auth = pick("auth", "auth", g.auth, "FLEETCTL_AUTH", p.Auth, "none")
	if !slices.Contains([]string{"none", "bearer", "sigv4"}, s.auth) {
		return nil, usageError("auth %q is none of none, bearer, sigv4", s.auth)
	}
	s.token = pick("token", "token", g.token, "FLEETCTL_TOKEN", p.Token, "")
	s.authHeader = pick("auth-header", "auth-header", g.authHeader, "FLEETCTL_AUTH_HEADER", p.AuthHeader, "Authorization")
	if strings.TrimSpace(s.authHeader) == "" || strings.ContainsAny(s.authHeader, ": \t") {
		return nil, usageError("auth-header %q is not a header name", s.authHeader)
	}
	s.region = pick("region", "region", g.region, "FLEETCTL_REGION", p.Region, "")
	s.awsProfile = pick("aws-profile", "aws-profile", g.awsProfile, "FLEETCTL_AWS_PROFILE", p.AWSProfile, "")
	s.cacheDir = pick("cache-dir", "cache-dir", g.cacheDir, "FLEETCTL_CACHE_DIR", p.CacheDir, defaultCacheDir())
	timeout := pick("timeout", "timeout", g.timeout.String(), "FLEETCTL_TIMEOUT", p.Timeout, "30s")
	if s.timeout, err = time.ParseDuration(timeout); err != nil || s.timeout <= 0 {
		return nil, usageError("timeout %q is not a positive duration such as 30s", timeout)
	}
	s.noColor = g.noColor || getenv("NO_COLOR") != ""

	s.headers = http.Header{}
	for name, v := range p.Headers {
		s.headers.Set(name, v)
	}
	var lines []string
	if env := getenv("FLEETCTL_HEADERS"); env != "" {
		lines = strings.Split(env, ";")
	}
	lines = append(lines, g.headers...)
	for _, line := range lines {
		name, v, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(name) == "" {
			return nil, usageError("header %q is not \"Name: value\"", line)
		}
		s.headers.Set(strings.TrimSpace(name), strings.TrimSpace(v))
	}
	var names []string
	for name := range s.headers {
		names = append(names, name+": "+s.headers.Get(name))
	}
	slices.Sort(names)
	s.shown = append(s.shown, setting{"headers", strings.Join(names, "; "), "profile, env FLEETCTL_HEADERS and --header"})
	return s, nil
}

// readConfig reads the config file; a missing file is an empty one unless
// it was named explicitly.
func readConfig(path string, named bool) (configFile, error) {
	var c configFile
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && !named {
		return c, nil
	}
	if err != nil {
		return c, usageError("config file: %v", err)
	}
	if err := yaml.Unmarshal(raw, &c); err != nil {
		return c, usageError("config file %s: %v", path, err)
	}
	return c, nil
}

func sortedKeys[V any](m map[string]V) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// client returns an API client with the settings in effect.
func (a *app) client(ctx context.Context) (*client.Client, error) {
	s := a.settings
	// Half the call's time per attempt leaves room for at least one retry,
	// and the user hears of each retry instead of waiting in silence.
	return a.clientWith(ctx, client.Options{AttemptTimeout: s.timeout / 2, CallTimeout: s.timeout, OnRetry: a.retrying})
}

// clientWith returns an API client with the settings in effect and the
// attempts, timeouts and retry notice of opts.
func (a *app) clientWith(ctx context.Context, opts client.Options) (*client.Client, error) {
	return a.settings.client(ctx, opts)
}

// client returns an API client with these settings and the attempts,
// timeouts and retry notice of opts.
func (s *settings) client(ctx context.Context, opts client.Options) (*client.Client, error) {
	opts.Endpoint, opts.Header, opts.UserAgent = s.endpoint, s.headers, "fleetctl/"+version
	switch s.auth {
	case "bearer":
		if s.token == "" {
			return nil, usageError("auth bearer needs a token (--token, FLEETCTL_TOKEN or the profile's token)")
		}
		opts.Auth = client.Token{Header: s.authHeader, Value: s.token}
	case "sigv4":
		signer, err := client.LoadSigV4(ctx, s.awsProfile, s.region)
		if err != nil {
			return nil, exitError{code: exitAuth, msg: fmt.Sprintf("sigv4 credentials: %v", err)}
		}
		opts.Auth = signer
	}
	c, err := client.New(opts)
	if err != nil {
		return nil, usageError("%v", err)
	}
	return c, nil
}

// retrying tells the user, on stderr, that a call is tried again.
func (a *app) retrying(op string, next int, wait time.Duration, err error) {
	fmt.Fprintf(a.stderr, "fleetctl: retrying in %s (attempt %d): %s\n", wait.Round(100*time.Millisecond), next, message(err))
}

func (a *app) configCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "config",
		Short: "Show the settings in effect and where each comes from",
		Long: `Shows every setting in effect and its source: a flag, a FLEETCTL_*
variable, the profile of the config file, or the default.

The config file (YAML) holds named profiles:

  default: local
  profiles:
    local:
      endpoint: http://127.0.0.1:3000
    prod:
      endpoint: https://abcdef1234.execute-api.us-east-1.amazonaws.com/prod
      auth: sigv4            # none, bearer or sigv4
      region: us-east-1
      awsProfile: fleet-ops  # AWS shared-config profile (SSO works)
      headers:
        X-Team: ops
    legacy:
      endpoint: https://abcdef1234.execute-api.us-east-1.amazonaws.com/prod
      auth: bearer           # a Lambda authorizer's token
      token: "…"
      authHeader: X-Fleet-Token  # the stack's AuthHeader, when not Authorization`,
		Example: `  fleetctl config
  fleetctl --profile prod config`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			rows := [][]string{{"SETTING", "VALUE", "SOURCE"}}
			for _, s := range a.settings.shown {
				v := s.value
				if s.name == "token" && v != "" {
					v = v[:min(4, len(v))] + "…"
				}
				rows = append(rows, []string{s.name, orDash(v), s.source})
			}
			writeTable(a.stdout, rows, nil)
			return nil
		},
	}
}
