//go:build resilience

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// This file is the reference model of the slave service: what the tables
// must hold, and what every request must answer, written from the service's
// contract in plain Go. It deliberately imports nothing of the service (not
// shared/machine, not shared/dynamo): a second, independent implementation
// only catches a defect when it does not share the defect's code.
//
// All times are epoch milliseconds of the suite's virtual clock, so the model
// is exact: the service reads the same clock.

// The states, spelled as on the wire.
const (
	mMissing        = "MISSING_ON_STARTUP"
	mActive         = "ACTIVE"
	mStarting       = "STARTING_DECOMMISSION"
	mDecommission   = "DECOMMISSIONING"
	mDecommissioned = "DECOMMISSIONED"
	mDead           = "DEAD"
	mFrozen         = "FROZEN"
)

var mStates = []string{mMissing, mActive, mStarting, mDecommission, mDecommissioned, mDead, mFrozen}

// decommissioning states are the three steps of taking a machine out.
func decommissioning(s string) bool {
	return s == mStarting || s == mDecommission || s == mDecommissioned
}

// draining is the states in which a slave shows its running-task count.
func draining(s string) bool { return s == mStarting || s == mDecommission }

// inactive states are machines the scheduler no longer sees.
func inactive(s string) bool { return s == mDead || s == mMissing }

// counted states take one of the places of the decommission limit.
func counted(s string) bool { return s == mStarting || s == mDecommission }

// Messages the contract fixes word for word: clients of the old API match
// on them.
func msgNotFound(id string) string {
	return fmt.Sprintf("Couldn't find an active Slave with id %s (result: FAILURE_NOT_FOUND)", id)
}
func msgNotFoundForDelete(id string) string { return "Couldn't find dead Slave with id " + id }
func msgAlready(id, target string) string {
	return fmt.Sprintf("FAILURE_ALREADY_AT_STATE - Slave %s is in %s state", id, target)
}
func msgIllegal(id, target string) string {
	return fmt.Sprintf("FAILURE_ILLEGAL_TRANSITION - Slave %s is in %s state", id, target)
}
func msgLimit(n, max int) string {
	return fmt.Sprintf("%d slaves are already decommissioning state (%d allowed at once). Allow these slaves to finish before decommissioning another", n, max)
}

const (
	msgNoRevert       = "Must include a machine state to revert to for an expiring machine state change"
	msgExpiringExists = "A current expiring object already exists, delete it first"
	msgExpiryRevert   = "Updated due to expiring action"
	msgNewMachine     = "New machine reported"
	msgReportedUp     = "Machine reported up"
	msgReportedLost   = "Machine reported lost"
	msgAbsent         = "Machine missing from a complete report"
)

// refConfig is the configuration the model and the service under test share.
type refConfig struct {
	maxDecommissioning int   // MAX_DECOMMISSIONING_SLAVES
	maxExpiring        int64 // MAX_EXPIRING_DURATION
	historyRetention   int64 // HISTORY_RETENTION
	deadRetention      int64 // DEAD_SLAVE_RETENTION
	idempotencyWindow  int64 // how long an Idempotency-Key's answer is remembered
	lossFraction       float64
	lossWindow         int64
	// identicalKeepsAge makes a report that describes a machine exactly as
	// stored leave the description's time alone, as the service does today,
	// instead of making it that report's time. A delayed report made between
	// the two then still replaces a description that a newer report
	// confirmed. The flag -resilience.strict-descriptions checks the
	// stricter rule (the newest report's description wins).
	identicalKeepsAge bool
}

// refEntry is one history entry. expiresAt is the TTL of a superseded
// entry, in epoch seconds as DynamoDB's TTL counts; 0 while it is current.
type refEntry struct {
	State     string
	Timestamp int64
	User      string
	Message   string
	expiresAt int64
}

// refSlave is one slave. Its current state is its newest history entry.
type refSlave struct {
	ID          string
	FirstSeenAt int64
	Host        string
	Rack        string
	Attributes  map[string]string
	Resources   string // compact JSON object, "" when none
	// runningTasks is the count of the report that described it, kept
	// while it drains; a report writes it as part of the description.
	runningTasks *int
	describedAt  int64 // time of the newest report that described it
	history      []refEntry
}

func (s *refSlave) current() refEntry { return s.history[len(s.history)-1] }

// refExpiring is a pending revert. ActionID is "" when the request had none
// (the service then makes one up).
type refExpiring struct {
	Slave    string
	User     string
	Start    int64
	ActionID string
	Revert   string
	Kill     bool
	Duration int64
	Message  string
}

func (e refExpiring) dueAt() int64 { return e.Start + e.Duration }

// refReceipt is the remembered answer of a request sent with an
// Idempotency-Key.
type refReceipt struct {
	fingerprint string
	at          int64
	status      int
	message     string
}

// refModel is the whole service as the model sees it.
type refModel struct {
	cfg      refConfig
	slaves   map[string]*refSlave
	expiring map[string]*refExpiring
	receipts map[string]refReceipt // by caller and key
	// limitAt is the time of the last move into or out of the counted
	// states. Those moves are ordered: each is stamped after the one before
	// it (unless that one is further ahead than any clock skew can explain),
	// so the limit's timeline can be read back from the histories.
	limitAt int64
	// phantoms are places of the limit held by no slave the model knows.
	phantoms int
}

func newRefModel(cfg refConfig) *refModel {
	return &refModel{cfg: cfg, slaves: map[string]*refSlave{}, expiring: map[string]*refExpiring{}, receipts: map[string]refReceipt{}}
}

// clone returns a deep copy, for trying the orders in which the service may
// apply the parts of one report or one expiry run.
func (m *refModel) clone() *refModel {
	c := *m
	c.slaves = make(map[string]*refSlave, len(m.slaves))
	for id, s := range m.slaves {
		cp := *s
		cp.Attributes = maps.Clone(s.Attributes)
		cp.history = slices.Clone(s.history)
		c.slaves[id] = &cp
	}
	c.expiring = make(map[string]*refExpiring, len(m.expiring))
	for id, e := range m.expiring {
		cp := *e
		c.expiring[id] = &cp
	}
	c.receipts = maps.Clone(m.receipts)
	return &c
}

// held is how many slaves occupy a place of the decommission limit.
func (m *refModel) held() int {
	n := m.phantoms
	for _, s := range m.slaves {
		if counted(s.current().State) {
			n++
		}
	}
	return n
}

// maxClockSkew is how far ahead of the deciding clock the last limit move
// may be and still be followed.
const maxClockSkew = 60_000

// append adds entry to slave id's history. The entry is never older than
// the one it follows, so that newest first by position and by time agree;
// a move into or out of the counted states is also stamped after the
// previous such move. The superseded entry starts its retention.
func (m *refModel) append(s *refSlave, e refEntry) refEntry {
	cur := s.current()
	e.Timestamp = max(e.Timestamp, cur.Timestamp)
	if counted(cur.State) != counted(e.State) {
		if m.limitAt < e.Timestamp+maxClockSkew {
			e.Timestamp = max(e.Timestamp, m.limitAt+1)
		}
		m.limitAt = e.Timestamp
	}
	if m.cfg.historyRetention > 0 {
		s.history[len(s.history)-1].expiresAt = (e.Timestamp + m.cfg.historyRetention) / 1000
	}
	if !draining(e.State) {
		s.runningTasks = nil // leaving the draining states clears the count
	}
	s.history = append(s.history, e)
	m.cleanupExpiring(s.ID, e.State)
	return e
}

// cleanupExpiring drops the slave's expiring record when moving to next
// makes it pointless: it reverts to where the slave now is, or to a state
// the slave can no longer be reverted to from here, or the slave is gone
// from the scheduler's view.
func (m *refModel) cleanupExpiring(id, next string) {
	e := m.expiring[id]
	if e == nil {
		return
	}
	r := e.Revert
	drop := next == r || inactive(next) ||
		(r == mStarting && decommissioning(next)) ||
		((r == mDecommission || r == mDecommissioned) && (next == mFrozen || next == mActive)) ||
		(r == mFrozen && decommissioning(next))
	if drop {
		delete(m.expiring, id)
	}
}

// legal returns the 409 message of moving a slave in cur to target, or "".
// The messages name the requested state.
func legal(id, cur, target string) string {
	switch {
	case cur == target:
		return msgAlready(id, target)
	case decommissioning(cur) && (target == mFrozen || target == mStarting):
		return msgIllegal(id, target)
	}
	return ""
}

// refChange is a freeze, decommission or activate request.
type refChange struct {
	Slave    string
	Target   string // the action's state
	Caller   string // identity id
	Email    string // the caller's email, "" when none
	Message  string
	Duration *int64
	Revert   *string
	ActionID string
	Kill     bool
	Key      string // Idempotency-Key header
}

// fingerprint tells two requests of one caller apart for the
// Idempotency-Key: same slave, action and body, or not.
func (c refChange) fingerprint() string {
	d, r := "-", "-"
	if c.Duration != nil {
		d = fmt.Sprint(*c.Duration)
	}
	if c.Revert != nil {
		r = *c.Revert
	}
	return strings.Join([]string{c.Slave, c.Target, c.Message, d, r, c.ActionID, fmt.Sprint(c.Kill)}, "\x00")
}

// refAnswer is an HTTP answer: its status, and its error message when the
// contract fixes it ("" when any message will do).
type refAnswer struct {
	status  int
	message string
}

var ok200 = refAnswer{status: 200}

// Change answers a user change at now and applies it.
func (m *refModel) Change(now int64, c refChange) refAnswer {
	if c.Key == "" {
		return m.decide(now, c)
	}
	// A key names one request of one caller, across slaves and actions.
	rk := c.Caller + "\x00" + c.Key
	if r, ok := m.receipts[rk]; ok && now-r.at < m.cfg.idempotencyWindow {
		if r.fingerprint != c.fingerprint() {
			return refAnswer{status: 409} // a key reused for another request
		}
		return refAnswer{r.status, r.message}
	}
	a := m.decide(now, c)
	if a.status == 200 || a.status == 400 || a.status == 404 || a.status == 409 {
		m.receipts[rk] = refReceipt{c.fingerprint(), now, a.status, a.message}
	}
	return a
}

// decide applies a change in the contract's check order: the expiring
// request, the slave's existence, the transition, the limit.
func (m *refModel) decide(now int64, c refChange) refAnswer {
	if c.Duration != nil {
		if a, bad := m.validateExpiring(c); bad {
			return a
		}
	}
	s := m.slaves[c.Slave]
	if s == nil {
		return refAnswer{404, msgNotFound(c.Slave)}
	}
	cur := s.current()
	if msg := legal(c.Slave, cur.State, c.Target); msg != "" {
		return refAnswer{409, msg}
	}
	if counted(c.Target) && !counted(cur.State) && m.cfg.maxDecommissioning > 0 && m.held() >= m.cfg.maxDecommissioning {
		return refAnswer{400, msgLimit(m.held(), m.cfg.maxDecommissioning)}
	}
	// The expiring record starts when the change was decided, before the
	// limit's ordering may move the entry a millisecond on.
	start := max(now, cur.Timestamp)
	m.append(s, refEntry{State: c.Target, Timestamp: now, User: c.Email, Message: c.Message})
	if c.Duration != nil {
		m.expiring[c.Slave] = &refExpiring{Slave: c.Slave, User: c.Email, Start: start, ActionID: c.ActionID,
			Revert: *c.Revert, Kill: c.Kill, Duration: *c.Duration, Message: c.Message}
	}
	return ok200
}

// validateExpiring checks an expiring change request, in the contract's
// order. Only the first two refusals have fixed messages.
func (m *refModel) validateExpiring(c refChange) (refAnswer, bool) {
	if c.Revert == nil {
		return refAnswer{400, msgNoRevert}, true
	}
	if m.expiring[c.Slave] != nil {
		return refAnswer{409, msgExpiringExists}, true
	}
	r, t := *c.Revert, c.Target
	switch {
	case r == mStarting && decommissioning(t),
		(r == mDecommission || r == mDecommissioned) && (t == mFrozen || t == mActive),
		r == mFrozen && decommissioning(t),
		r == mDead || r == mMissing || r == mDecommission,
		r == mDecommissioned && !c.Kill,
		*c.Duration <= 0 || *c.Duration > m.cfg.maxExpiring:
		return refAnswer{status: 400}, true
	}
	return refAnswer{}, false
}

// Delete removes a slave with its history and expiring record.
func (m *refModel) Delete(id string) refAnswer {
	if m.slaves[id] == nil {
		return refAnswer{404, msgNotFoundForDelete(id)}
	}
	m.remove(id)
	return ok200
}

// remove forgets a slave. Receipts outlive it: they belong to requests.
func (m *refModel) remove(id string) {
	delete(m.slaves, id)
	delete(m.expiring, id)
}

// DeleteExpiring cancels a slave's pending revert; always 200.
func (m *refModel) DeleteExpiring(id string) refAnswer {
	delete(m.expiring, id)
	return ok200
}

// DeleteDead removes every DEAD slave whose state is older than before,
// and returns how many.
func (m *refModel) DeleteDead(before int64) int {
	n := 0
	for _, id := range slices.Sorted(maps.Keys(m.slaves)) {
		if cur := m.slaves[id].current(); cur.State == mDead && cur.Timestamp < before {
			m.remove(id)
			n++
		}
	}
	return n
}

// refExpiryResult counts what one run of the expiry trigger did.
type refExpiryResult struct {
	Due, Applied, Skipped, Dropped, Deferred int
}

// Due lists, oldest first, the slaves whose expiring record is due at now:
// strictly more than its duration has passed.
func (m *refModel) Due(now int64) []string {
	var ids []string
	for id, e := range m.expiring {
		if now-e.Start > e.Duration {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b string) int {
		return int(m.expiring[a].dueAt() - m.expiring[b].dueAt())
	})
	return ids
}

// Expire applies the due record of slave id at now: the revert follows the
// rules of a user change, by the user who asked for it. A revert into
// STARTING_DECOMMISSION that the limit refuses waits for the next run.
func (m *refModel) Expire(now int64, id string, res *refExpiryResult) {
	e := m.expiring[id]
	s := m.slaves[id]
	switch {
	case s == nil:
		delete(m.expiring, id)
		res.Dropped++
		return
	case legal(id, s.current().State, e.Revert) != "":
		delete(m.expiring, id)
		res.Skipped++
		return
	case counted(e.Revert) && !counted(s.current().State) && m.cfg.maxDecommissioning > 0 && m.held() >= m.cfg.maxDecommissioning:
		res.Deferred++
		return
	}
	m.append(s, refEntry{State: e.Revert, Timestamp: now, User: e.User, Message: msgExpiryRevert})
	res.Applied++
}

// refMachine is one entry of a machine report, as sent.
type refMachine struct {
	ID           string // "" for an entry without an id
	Host         string
	Rack         string
	Attributes   map[string]string
	Resources    string // compact JSON object or ""
	Lost         bool
	RunningTasks *int
	Malformed    bool // has an id but is otherwise unreadable
}

// refReport is a machine report as sent.
type refReport struct {
	NoMachines  bool   // no "machines" list at all
	EventTime   *int64 // the EventBridge event's time (whole seconds), nil when none
	Complete    bool
	ConfirmLoss bool
	Machines    []refMachine
	envelope    bool // sent as an EventBridge event rather than its bare detail
}

// refObservation is what a report says of one machine.
type refObservation struct {
	refMachine
	absent bool // known, not DEAD, and missing from a complete report
	held   bool // a loss the mass-loss brake refuses
}

// refReportResult is what a report did, as the handler counts it.
type refReportResult struct {
	Refused bool
	Absent  int
	Held    int
}

// Observations reads a report received at now into the time it was made
// and what it says of each machine, in the order the service decides them.
// The report time is the event's, never later than its receipt. A
// machine named twice counts once, with what its later entry says.
func (m *refModel) Observations(now int64, rep refReport) (at int64, obs []refObservation, res refReportResult) {
	if rep.NoMachines || slices.ContainsFunc(rep.Machines, func(x refMachine) bool { return x.ID == "" }) {
		return 0, nil, refReportResult{Refused: true}
	}
	at = now
	if rep.EventTime != nil {
		at = min(*rep.EventTime, now)
	}
	seen := map[string]bool{}
	index := map[string]int{}
	for _, x := range rep.Machines {
		seen[x.ID] = true
		if x.Malformed {
			continue
		}
		if i, ok := index[x.ID]; ok {
			obs[i] = refObservation{refMachine: x}
			continue
		}
		index[x.ID] = len(obs)
		obs = append(obs, refObservation{refMachine: x})
	}
	if rep.Complete {
		for _, id := range slices.Sorted(maps.Keys(m.slaves)) {
			if !seen[id] && m.slaves[id].current().State != mDead {
				obs = append(obs, refObservation{refMachine: refMachine{ID: id}, absent: true})
				res.Absent++
			}
		}
	}
	if !rep.ConfirmLoss {
		res.Held = m.brake(at, obs)
	}
	return at, obs, res
}

// brake holds back the losses of a report when, with the slaves that went
// DEAD within the loss window before it, they would take more than the
// allowed fraction of the fleet that was live before them (at least 3
// machines, in a fleet of at least 10). It marks them held and returns how
// many.
func (m *refModel) brake(at int64, obs []refObservation) int {
	live, recent := 0, 0
	for _, s := range m.slaves {
		switch cur := s.current(); {
		case cur.State != mDead:
			live++
		case cur.Timestamp > at-m.cfg.lossWindow:
			recent++
		}
	}
	var losing []int
	for i, o := range obs {
		s := m.slaves[o.ID]
		if (o.Lost || o.absent) && s != nil && s.current().State != mDead && !m.stale(s, at) {
			losing = append(losing, i)
		}
	}
	lost, fleet := recent+len(losing), live+recent
	if len(losing) == 0 || fleet < 10 || lost < 3 || float64(lost) <= m.cfg.lossFraction*float64(fleet) {
		return 0
	}
	for _, i := range losing {
		obs[i].held = true
	}
	return len(losing)
}

// staleAfter is how much older than a slave's current state a report must
// be to change nothing: event times are whole seconds, so a report made in
// the same second as a change may carry an earlier time and still be newer.
const staleAfter = 1000

func (m *refModel) stale(s *refSlave, at int64) bool { return at < s.current().Timestamp-staleAfter }

// Observe applies what a report made at at and received at now says of one
// machine.
func (m *refModel) Observe(now, at int64, o refObservation) {
	s := m.slaves[o.ID]
	if s == nil {
		if o.Lost || o.absent {
			return
		}
		s = &refSlave{ID: o.ID, FirstSeenAt: now, history: []refEntry{{State: mActive, Timestamp: at, Message: msgNewMachine}}}
		describeRef(s, o.refMachine, at, mActive)
		m.slaves[o.ID] = s
		return
	}
	if m.stale(s, at) {
		return
	}
	cur := s.current()
	next, reason := systemNext(cur.State, o)
	if !o.absent {
		m.refresh(s, o.refMachine, at, next)
	}
	if next == cur.State {
		return
	}
	e := refEntry{State: next, Timestamp: at, Message: reason}
	if decommissioning(cur.State) && decommissioning(next) {
		// The operator's decommission progressing: still theirs.
		e.User, e.Message = cur.User, cur.Message
	}
	m.append(s, e)
}

// refresh replaces the description with a report's, the slave then in
// state next, unless a newer report already described the machine.
func (m *refModel) refresh(s *refSlave, x refMachine, at int64, next string) {
	if at < s.describedAt {
		return
	}
	if m.cfg.identicalKeepsAge && sameDescription(s, x, next) {
		return
	}
	describeRef(s, x, at, next)
}

// sameDescription reports whether a report describes the slave, then in
// state next, as it is: its running-task count included, which a report
// writes while the slave drains.
func sameDescription(s *refSlave, x refMachine, next string) bool {
	d := *s
	describeRef(&d, x, 0, next)
	return d.Host == s.Host && d.Rack == s.Rack && maps.Equal(d.Attributes, s.Attributes) && d.Resources == s.Resources &&
		countText(d.runningTasks) == countText(s.runningTasks)
}

func countText(n *int) string {
	if n == nil {
		return ""
	}
	return strconv.Itoa(*n)
}

func describeRef(s *refSlave, x refMachine, at int64, next string) {
	s.Host, s.Rack, s.Attributes, s.Resources = x.Host, x.Rack, maps.Clone(x.Attributes), x.Resources
	s.runningTasks = nil
	if draining(next) && x.RunningTasks != nil {
		s.runningTasks = new(*x.RunningTasks)
	}
	if s.Rack == "" {
		s.Rack = "DEFAULT"
	}
	if s.Attributes == nil {
		s.Attributes = map[string]string{}
	}
	s.describedAt = at
}

// systemNext is the state a report moves a slave in cur to, and why.
func systemNext(cur string, o refObservation) (string, string) {
	switch {
	case (o.Lost || o.absent) && (o.held || cur == mDead):
		return cur, ""
	case o.absent:
		return mDead, msgAbsent
	case o.Lost:
		return mDead, msgReportedLost
	case inactive(cur):
		return mActive, msgReportedUp
	case o.RunningTasks == nil:
		return cur, ""
	case cur == mStarting && *o.RunningTasks > 0:
		return mDecommission, ""
	case (cur == mStarting || cur == mDecommission) && *o.RunningTasks == 0:
		return mDecommissioned, ""
	}
	return cur, ""
}

// The views: what the API shows, in the form the suite compares.

// viewEntry is a history entry or a current state as the API shows it.
type viewEntry struct {
	State     string
	Timestamp int64
	User      string
	Message   string
}

func (e viewEntry) String() string {
	return fmt.Sprintf("%s@%d user=%q msg=%q", e.State, e.Timestamp, e.User, e.Message)
}

// viewSlave is a slave's details.
type viewSlave struct {
	FirstSeenAt int64
	Current     viewEntry
	Host, Rack  string
	Attributes  string // JSON
	Resources   string // compact JSON, "" when omitted
	// RunningTasks is the count shown, "" when omitted.
	RunningTasks string
}

// viewExpiring is an expiring record as listed. ActionID "*" stands for
// "any non-empty id" (the service makes one up when the request had none).
type viewExpiring struct {
	User, ActionID, Revert string
	Start, Duration        int64
	Kill                   bool
	Message                string
	RequestActionID        string
}

// View is what the model says the API shows of slave id at now: its
// details (nil when unknown), its history newest first, and its expiring
// record (nil when none is listed).
func (m *refModel) View(now int64, id string) (*viewSlave, []viewEntry, *viewExpiring) {
	s := m.slaves[id]
	if s == nil {
		return nil, []viewEntry{}, nil
	}
	cur := s.current()
	attrs, _ := json.Marshal(s.Attributes)
	d := &viewSlave{FirstSeenAt: s.FirstSeenAt, Current: viewEntry{cur.State, cur.Timestamp, cur.User, cur.Message},
		Host: s.Host, Rack: s.Rack, Attributes: string(attrs), Resources: s.Resources, RunningTasks: countText(s.runningTasks)}
	history := []viewEntry{}
	for i := len(s.history) - 1; i >= 0; i-- {
		e := s.history[i]
		// TTL counts whole seconds: an entry is gone from the second its
		// expiry falls in.
		if e.expiresAt == 0 || e.expiresAt > floorDiv(now, 1000) {
			history = append(history, viewEntry{e.State, e.Timestamp, e.User, e.Message})
		}
	}
	var x *viewExpiring
	if e := m.expiring[id]; e != nil && (e.dueAt()/1000+expiringGrace) > floorDiv(now, 1000) {
		x = &viewExpiring{User: e.User, ActionID: e.ActionID, Revert: e.Revert, Start: e.Start, Duration: e.Duration,
			Kill: e.Kill, Message: e.Message, RequestActionID: e.ActionID}
		if x.ActionID == "" {
			x.ActionID = "*"
		}
	}
	return d, history, x
}

// expiringGrace is how long, in seconds, a record outlives its due time
// before the table's TTL may collect it (and the listing stops showing it).
const expiringGrace = 7 * 24 * 3600

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// compactJSON returns raw compacted, for comparing JSON objects.
func compactJSON(raw []byte) string {
	var buf bytes.Buffer
	if len(raw) == 0 || json.Compact(&buf, raw) != nil {
		return string(raw)
	}
	return buf.String()
}
