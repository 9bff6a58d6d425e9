// Package config reads the service's environment variables (docs/deploying.md, Configuration) once,
// at cold start, and names the variable in the one error it returns when a
// value is invalid. Endpoints are not configuration here: the SDK reads its
// own AWS_ENDPOINT_URL* variables.
package config

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/machine"
)

// Slaves is the configuration of the slave functions.
type Slaves struct {
	Tables             Tables            // SLAVES_TABLE, HISTORY_TABLE, EXPIRING_TABLE, REQUESTS_TABLE
	Limits             machine.Limits    // MAX_DECOMMISSIONING_SLAVES, MAX_EXPIRING_DURATION
	DeadSlaveRetention time.Duration     // DEAD_SLAVE_RETENTION
	HistoryRetention   time.Duration     // HISTORY_RETENTION
	Policy             access.Policy     // AUTH_MODE, ADMIN_GROUPS, READ_GROUPS
	LossBrake          machine.LossBrake // MAX_LOST_FRACTION, LOST_WINDOW
	// DynamoDBAttemptTimeout cuts off one attempt of a DynamoDB call
	// (DYNAMODB_ATTEMPT_TIMEOUT). The template never sets it: a DynamoDB
	// page answers in milliseconds and the default, one second, suits it.
	// The local stack sets it (dev/run), because the emulator takes about a
	// second per 1 MB page and answers one request at a time (docs/decisions.md,
	// "Deadlines of the local stack").
	DynamoDBAttemptTimeout time.Duration
}

// DefaultDynamoDBAttemptTimeout is DYNAMODB_ATTEMPT_TIMEOUT unset: the
// production deadline of one DynamoDB attempt (sdkconfig.DynamoDBAttemptTimeout).
const DefaultDynamoDBAttemptTimeout = time.Second

// Tables names the DynamoDB tables; it converts to dynamo.Tables. The config
// package does not import the DynamoDB adapter, so that the log function,
// which reads none of these tables, does not link the slave store (a
// millisecond of cold start, BENCHMARKS.md).
type Tables struct {
	Slaves, History, Expiring, Requests, Changes string
}

// LoadSlaves reads the slave functions' variables from getenv.
func LoadSlaves(getenv func(string) string) (Slaves, error) {
	r := reader{getenv: getenv}
	c := Slaves{
		Tables: Tables{
			Slaves:   r.required("SLAVES_TABLE"),
			History:  r.required("HISTORY_TABLE"),
			Expiring: r.required("EXPIRING_TABLE"),
			Requests: r.required("REQUESTS_TABLE"),
			Changes:  r.required("CHANGES_TABLE"),
		},
		Limits: machine.Limits{
			MaxDecommissioning: r.count("MAX_DECOMMISSIONING_SLAVES", 2),
			MaxExpiring:        r.duration("MAX_EXPIRING_DURATION", 30*24*time.Hour),
		},
		DeadSlaveRetention: r.duration("DEAD_SLAVE_RETENTION", 7*24*time.Hour),
		HistoryRetention:   r.duration("HISTORY_RETENTION", 90*24*time.Hour),
		Policy:             r.policy(),
		LossBrake: machine.LossBrake{
			MaxFraction: r.fraction("MAX_LOST_FRACTION", machine.DefaultLossBrake.MaxFraction),
			Window:      r.duration("LOST_WINDOW", machine.DefaultLossBrake.Window),
		},
		DynamoDBAttemptTimeout: r.duration("DYNAMODB_ATTEMPT_TIMEOUT", DefaultDynamoDBAttemptTimeout),
	}
	return c, r.err
}

// MaxURLTTL caps LOG_URL_TTL: a URL presigned with a Lambda role's
// temporary credentials stops working when they expire anyway (docs/behaviour.md "Task logs").
const MaxURLTTL = 12 * time.Hour

// Logs is the configuration of the log function.
type Logs struct {
	Buckets     []string      // LOG_BUCKETS; none means S3 is not configured
	Format      logkey.Format // LOG_KEY_FORMAT
	URLTTL      time.Duration // LOG_URL_TTL
	Lookback    time.Duration // LOG_LOOKBACK
	ListTimeout time.Duration // LOG_LIST_TIMEOUT
	LinkTimeout time.Duration // LOG_LINK_TIMEOUT
	Policy      access.Policy // AUTH_MODE, ADMIN_GROUPS, READ_GROUPS
}

// S3 is how the log function's S3 adapter reaches S3, apart from what the
// SDK's own variables say (AWS_ENDPOINT_URL_S3 and the rest).
type S3 struct {
	PathStyle bool // S3_FORCE_PATH_STYLE, for S3 servers without virtual-hosted buckets
}

// LoadS3 reads the S3 adapter's variables from getenv.
func LoadS3(getenv func(string) string) (S3, error) {
	r := reader{getenv: getenv}
	c := S3{PathStyle: r.boolean("S3_FORCE_PATH_STYLE")}
	return c, r.err
}

// Reports is where the inventory function reads the large form of machine
// reports (docs/behaviour.md "Machine reports").
type Reports struct {
	Bucket string // REPORTS_BUCKET; "" when reports come only inline
	S3     S3     // S3_FORCE_PATH_STYLE
	// PartSize is REPORT_PART_SIZE: a report that changes more machines is
	// applied in parts of this many, each within one invocation's timeout.
	PartSize int
	// MemoryMB is the function's memory, AWS_LAMBDA_FUNCTION_MEMORY_SIZE
	// as Lambda sets it; 0 when unset (a local run). What a report object
	// may expand to follows from it.
	MemoryMB int
}

// DefaultPartSize is REPORT_PART_SIZE when unset: 2,000 machines, each a
// read and a write, take about 7 s on DynamoDB, far inside the timeout.
const DefaultPartSize = 2000

// LoadReports reads the reports bucket's variables from getenv.
func LoadReports(getenv func(string) string) (Reports, error) {
	r := reader{getenv: getenv}
	c := Reports{Bucket: strings.TrimSpace(getenv("REPORTS_BUCKET")), S3: S3{PathStyle: r.boolean("S3_FORCE_PATH_STYLE")},
		PartSize: r.count("REPORT_PART_SIZE", DefaultPartSize), MemoryMB: r.count("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", 0)}
	if c.PartSize == 0 {
		r.fail("REPORT_PART_SIZE", "must be at least 1")
	}
	return c, r.err
}

// Indexer is the configuration of the task-log indexer.
type Indexer struct {
	Buckets []string      // LOG_BUCKETS: events of other buckets are skipped
	Format  logkey.Format // LOG_KEY_FORMAT, which the indexer parses keys with
	Table   string        // LOG_INDEX_TABLE
	S3      S3            // S3_FORCE_PATH_STYLE
	// DynamoDBAttemptTimeout is DYNAMODB_ATTEMPT_TIMEOUT, as for the slave
	// functions.
	DynamoDBAttemptTimeout time.Duration
}

// LoadIndexer reads the indexer's variables from getenv.
func LoadIndexer(getenv func(string) string) (Indexer, error) {
	r := reader{getenv: getenv}
	c := Indexer{
		Buckets:                r.buckets("LOG_BUCKETS"),
		Format:                 r.format("LOG_KEY_FORMAT"),
		Table:                  r.required("LOG_INDEX_TABLE"),
		S3:                     S3{PathStyle: r.boolean("S3_FORCE_PATH_STYLE")},
		DynamoDBAttemptTimeout: r.duration("DYNAMODB_ATTEMPT_TIMEOUT", DefaultDynamoDBAttemptTimeout),
	}
	return c, r.err
}

// Publisher is PublisherFunction's configuration.
type Publisher struct {
	Bus string // EVENT_BUS_NAME: the bus the "Slave Changed" events go to
}

// LoadPublisher reads the publisher's variables from getenv.
func LoadPublisher(getenv func(string) string) (Publisher, error) {
	r := reader{getenv: getenv}
	c := Publisher{Bus: r.required("EVENT_BUS_NAME")}
	return c, r.err
}

// LogIndex is whether and where the log function reads the task-log index.
type LogIndex struct {
	On    bool   // LOG_INDEX: lookups read the index instead of listing the buckets
	Table string // LOG_INDEX_TABLE, required when On
	// DynamoDBAttemptTimeout is DYNAMODB_ATTEMPT_TIMEOUT, as for the slave
	// functions.
	DynamoDBAttemptTimeout time.Duration
}

// LoadLogIndex reads the log function's index variables from getenv.
func LoadLogIndex(getenv func(string) string) (LogIndex, error) {
	r := reader{getenv: getenv}
	c := LogIndex{On: r.boolean("LOG_INDEX"), DynamoDBAttemptTimeout: r.duration("DYNAMODB_ATTEMPT_TIMEOUT", DefaultDynamoDBAttemptTimeout)}
	if c.On {
		c.Table = r.required("LOG_INDEX_TABLE")
	}
	return c, r.err
}

// LoadLogs reads the log function's variables from getenv.
func LoadLogs(getenv func(string) string) (Logs, error) {
	r := reader{getenv: getenv}
	c := Logs{
		Buckets:     r.buckets("LOG_BUCKETS"),
		Format:      r.format("LOG_KEY_FORMAT"),
		URLTTL:      r.duration("LOG_URL_TTL", time.Hour),
		Lookback:    r.duration("LOG_LOOKBACK", 30*24*time.Hour),
		ListTimeout: r.duration("LOG_LIST_TIMEOUT", 5*time.Second),
		LinkTimeout: r.duration("LOG_LINK_TIMEOUT", 2*time.Second),
		Policy:      r.policy(),
	}
	if c.URLTTL > MaxURLTTL {
		r.fail("LOG_URL_TTL", "must be at most %v, got %v", MaxURLTTL, c.URLTTL)
	}
	return c, r.err
}

// reader keeps the first error, so a loader reads top to bottom.
type reader struct {
	getenv func(string) string
	err    error
}

func (r *reader) fail(name, format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("invalid configuration: %s %s", name, fmt.Sprintf(format, args...))
	}
}

func (r *reader) required(name string) string {
	v := strings.TrimSpace(r.getenv(name))
	if v == "" {
		r.fail(name, "must be set")
	}
	return v
}

func (r *reader) count(name string, def int) int {
	v := strings.TrimSpace(r.getenv(name))
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		r.fail(name, "must be a whole number ≥ 0, got %q", v)
	}
	return n
}

// fraction reads a number in (0, 1].
func (r *reader) fraction(name string, def float64) float64 {
	v := strings.TrimSpace(r.getenv(name))
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f > 0 && f <= 1) {
		r.fail(name, "must be a number above 0 and at most 1, got %q", v)
	}
	return f
}

// duration reads a Go duration ("90m", "720h") or a number of days ("30d").
func (r *reader) duration(name string, def time.Duration) time.Duration {
	v := strings.TrimSpace(r.getenv(name))
	if v == "" {
		return def
	}
	var d time.Duration
	var err error
	if days, ok := strings.CutSuffix(v, "d"); ok {
		var n int
		n, err = strconv.Atoi(days)
		if err == nil && n > int(math.MaxInt64/int64(24*time.Hour)) {
			err = strconv.ErrRange
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		d, err = time.ParseDuration(v)
	}
	if err != nil || d <= 0 {
		r.fail(name, "must be a positive duration like 90m, 720h or 30d, got %q", v)
	}
	return d
}

// list reads a comma-separated list. Only commas separate: a space inside
// an entry is part of it (the group "Helpdesk Admins" is not "Admins"),
// space around one is trimmed, and empty entries are dropped.
func (r *reader) list(name string) []string {
	var out []string
	for _, part := range strings.Split(r.getenv(name), ",") {
		if p := strings.TrimSpace(part); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (r *reader) policy() access.Policy {
	p := access.Policy{Mode: access.ModeNone, AdminGroups: r.list("ADMIN_GROUPS"), ReadGroups: r.list("READ_GROUPS")}
	switch v := strings.TrimSpace(r.getenv("AUTH_MODE")); v {
	case "", "none":
	case "authorizer":
		p.Mode = access.ModeAuthorizer
	default:
		r.fail("AUTH_MODE", "must be none or authorizer, got %q", v)
	}
	return p
}

// buckets reads a list of S3 bucket names (lowercase letters, digits, '.'
// and '-', 3 to 63 characters), without duplicates.
func (r *reader) buckets(name string) []string {
	names := r.list(name)
	for i, b := range names {
		ok := len(b) >= 3 && len(b) <= 63 && !strings.Contains(b, "..") &&
			strings.Trim(b, "abcdefghijklmnopqrstuvwxyz0123456789.-") == ""
		if !ok {
			r.fail(name, "must be S3 bucket names separated by commas, got %q", b)
		}
		if slices.Contains(names[:i], b) {
			r.fail(name, "names bucket %q twice", b)
		}
	}
	return names
}

func (r *reader) format(name string) logkey.Format {
	v := strings.TrimSpace(r.getenv(name))
	if v == "" {
		v = logkey.DefaultFormat
	}
	f, err := logkey.ParseFormat(v)
	if err != nil {
		r.fail(name, "%v", err)
	}
	return f
}

func (r *reader) boolean(name string) bool {
	switch v := strings.TrimSpace(r.getenv(name)); strings.ToLower(v) {
	case "", "false", "0":
		return false
	case "true", "1":
		return true
	default:
		r.fail(name, "must be true or false, got %q", v)
		return false
	}
}
