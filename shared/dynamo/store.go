// Package dynamo adapts the machine domain to DynamoDB: five tables (slaves
// with a ByState index, history, expiring, requests, the receipts of
// change requests, and changes, the change feed) and the transactions that
// keep a slave's state, its history, its expiring record, its receipt and
// its feed entry consistent. It is a driver
// of the change protocol (shared/change): it implements a consistent read
// and writes conditioned on what was read, and the protocol decides,
// retries and keeps receipts. It translates SDK errors into fault kinds.
package dynamo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetops/fleet/shared/awsfault"
	"github.com/fleetops/fleet/shared/change"
	"github.com/fleetops/fleet/shared/machine"
)

// API is the part of the DynamoDB client the store uses.
type API interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	BatchWriteItem(context.Context, *dynamodb.BatchWriteItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
	TransactGetItems(context.Context, *dynamodb.TransactGetItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactGetItemsOutput, error)
	TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// Tables names the tables.
type Tables struct {
	Slaves   string
	History  string
	Expiring string
	Requests string // receipts of change requests, for idempotent retries
	Changes  string // the change feed (feed.go)
}

// byStateIndex is the slaves table's index keyed (state, id).
const byStateIndex = "ByState"

// limitID is the key of the item in the slaves table that holds the set of
// slaves counting toward MAX_DECOMMISSIONING_SLAVES. Every change that
// enters or leaves those states updates the set in its own transaction, and
// entering is conditioned on the set's size, so the limit holds under
// concurrent requests. The item has no state attribute: the ByState index
// never sees it and reads skip it. No slave id starts with '#' (machine.ValidateID).
const limitID = "#decommissioning"

// Store keeps slaves, their history and expiring records in DynamoDB.
// Changes (Apply, ApplyOnce, Delete, DeleteDead, DeleteExpiring) are the
// change protocol's, over the primitives of driver.
type Store struct {
	*change.Protocol
	db     API
	tables Tables
	// listed is how many slaves this instance's last whole List read,
	// -1 before its first: the next List scans in as many segments as
	// that many slaves pay for (scanSegments).
	listed atomic.Int64
	// headKeys are the keys of the feed's heads, which every list and
	// feed read reads (Heads): made once, as the SDK only reads them.
	headKeys []map[string]types.AttributeValue
}

// New returns a store over db. History entries expire (DynamoDB TTL)
// historyRetention after they were written, once superseded; 0 keeps them.
func New(db API, tables Tables, historyRetention time.Duration) *Store {
	s := &Store{db: db, tables: tables}
	s.listed.Store(-1)
	for shard := range change.FeedShards {
		s.headKeys = append(s.headKeys, feedKey(shard, 0))
	}
	s.Protocol = change.New((*driver)(s), historyRetention)
	return s
}

// driver is the store as the change protocol's driver (change.Store).
type driver Store

// Get returns the slave with id, or nil when there is none.
func (s *Store) Get(ctx context.Context, id string) (*machine.Slave, error) {
	if !storable(id) {
		return nil, nil
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.tables.Slaves, Key: slaveKey(id)})
	if err != nil {
		return nil, translate("get slave "+id, err)
	}
	return decodeSlave(out.Item)
}

// List calls each with every slave, one at a time, in no particular order.
// It scans the table in as many segments as the fleet pays for
// (scanSegments), and stops at the first error, each's included, which it
// returns.
func (s *Store) List(ctx context.Context, each func(machine.Slave) error) error {
	segments := scanSegments(s.listed.Load())
	read := 0 // slaves handed to each
	count := func(slave machine.Slave) error {
		read++
		return each(slave)
	}
	var err error
	if segments == 1 {
		// One segment is read where the list is, with no goroutine.
		err = s.scanSegment(ctx, 0, 1, func(page []machine.Slave) error {
			for _, slave := range page {
				if err := count(slave); err != nil {
					return err
				}
			}
			return nil
		})
	} else {
		err = s.scanParallel(ctx, segments, count)
	}
	if err == nil {
		s.listed.Store(int64(read))
	}
	return err
}

// scanParallel reads the table in segments at once, calling each with
// every slave on the calling goroutine, holding no more than a page of
// each segment while each works.
func (s *Store) scanParallel(ctx context.Context, segments int, each func(machine.Slave) error) error {
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pages := make(chan []machine.Slave)
	// The first error stops every segment; theirs that follow only say so.
	var failed error
	var once sync.Once
	fail := func(err error) {
		once.Do(func() {
			failed = err
			cancel()
		})
	}
	var wg sync.WaitGroup
	for seg := range segments {
		wg.Go(func() {
			err := s.scanSegment(ctx, seg, segments, func(page []machine.Slave) error {
				select {
				case pages <- page:
					return nil
				case <-ctx.Done():
					return errStopped
				}
			})
			if err != nil && !errors.Is(err, errStopped) {
				fail(err)
			}
		})
	}
	go func() {
		wg.Wait()
		close(pages)
	}()
	var stop error
	for page := range pages {
		for _, slave := range page {
			if stop == nil {
				stop = each(slave)
			}
		}
		if stop != nil {
			cancel() // and drain the pages already sent
		}
	}
	if stop != nil {
		return stop
	}
	if failed != nil {
		return failed
	}
	// A segment that saw the request end while it waited to hand over a
	// page stops without an error of its own: the list is not whole.
	return translate("scan slaves", parent.Err())
}

// errStopped is how a segment learns that the scan stopped while it
// waited to hand over a page.
var errStopped = errors.New("the scan stopped")

// scanSegment reads segment seg of total, a page at a time, and hands each
// page to page; it stops at the first error, page's included.
func (s *Store) scanSegment(ctx context.Context, seg, total int, page func([]machine.Slave) error) error {
	in := &dynamodb.ScanInput{TableName: &s.tables.Slaves, Segment: aws.Int32(int32(seg)), TotalSegments: aws.Int32(int32(total))}
	p := dynamodb.NewScanPaginator(s.db, in)
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return translate("scan slaves", err)
		}
		slaves, err := decodeSlaves(out.Items)
		if err != nil {
			return err
		}
		if err := page(slaves); err != nil {
			return err
		}
	}
	return nil
}

// A Scan page holds 1 MB, about 1,500 slaves. Segments scanned in parallel
// pay for themselves once each has pages to read: below that, each is one
// more call (and goroutine) answering a few slaves. So a List scans one
// segment per slavesPerSegment slaves the last List read, at most
// maxSegments, and maxSegments when the instance has not listed yet (a
// cold start on a fleet of any size). 100,000 slaves: 8 segments of about
// 8 pages each; 12 slaves: one call.
const (
	slavesPerSegment = 3000
	maxSegments      = 8
)

func scanSegments(listed int64) int {
	if listed < 0 {
		return maxSegments
	}
	return int(min(max((listed+slavesPerSegment-1)/slavesPerSegment, 1), maxSegments))
}

// ListByState calls each with the slaves in state, one at a time, in id
// order, from the ByState index: it reads only slaves in that state. It
// stops at the first error, each's included, which it returns.
func (s *Store) ListByState(ctx context.Context, state machine.State, each func(machine.Slave) error) error {
	in := &dynamodb.QueryInput{
		TableName:                 &s.tables.Slaves,
		IndexName:                 aws.String(byStateIndex),
		KeyConditionExpression:    aws.String("#s = :s"),
		ExpressionAttributeNames:  map[string]string{"#s": "state"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": str(string(state))},
	}
	p := dynamodb.NewQueryPaginator(s.db, in)
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return translate("query slaves in "+string(state), err)
		}
		page, err := decodeSlaves(out.Items)
		if err != nil {
			return err
		}
		for _, slave := range page {
			if err := each(slave); err != nil {
				return err
			}
		}
	}
	return nil
}

// History returns the newest limit entries of the slave's history at now,
// newest first; none for an unknown id or a limit below 1. Entries past
// their TTL, which DynamoDB may not have collected yet, are left out.
//
// It reads no more than it answers, give or take those: each Query asks
// for the entries still missing (a Query's Limit counts the items it reads,
// before the TTL filter), and only entries the filter dropped cost another
// page.
func (s *Store) History(ctx context.Context, id string, now time.Time, limit int) ([]machine.Update, error) {
	if !storable(id) || limit < 1 {
		return nil, nil
	}
	in := &dynamodb.QueryInput{
		TableName:                 &s.tables.History,
		KeyConditionExpression:    aws.String("slaveId = :id"),
		FilterExpression:          aws.String("attribute_not_exists(expiresAt) OR expiresAt > :now"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": str(id), ":now": num(now.Unix())},
		ScanIndexForward:          aws.Bool(false),
	}
	var updates []machine.Update
	for {
		in.Limit = aws.Int32(int32(min(limit-len(updates), math.MaxInt32)))
		out, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, translate("query history of "+id, err)
		}
		var recs []historyRecord
		if err := attributevalue.UnmarshalListOfMaps(out.Items, &recs); err != nil {
			return nil, fmt.Errorf("decode history of %s: %w", id, err)
		}
		for _, r := range recs {
			updates = append(updates, r.update())
		}
		if len(updates) >= limit || len(out.LastEvaluatedKey) == 0 {
			return updates[:min(len(updates), limit)], nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// ListExpiring returns the pending expiring records at now, sorted by
// machine id. Records past their TTL (kept only until DynamoDB collects
// them) and records of slaves that are gone are left out.
func (s *Store) ListExpiring(ctx context.Context, now time.Time) ([]machine.Expiring, error) {
	var all []machine.Expiring
	p := dynamodb.NewScanPaginator(s.db, &dynamodb.ScanInput{
		TableName:                 &s.tables.Expiring,
		FilterExpression:          aws.String("expiresAt > :now"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": num(now.Unix())},
	})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, translate("scan expiring", err)
		}
		var recs []expiringRecord
		if err := attributevalue.UnmarshalListOfMaps(out.Items, &recs); err != nil {
			return nil, fmt.Errorf("decode expiring records: %w", err)
		}
		for _, r := range recs {
			all = append(all, r.expiring())
		}
	}
	ids := make([]string, len(all))
	for i, e := range all {
		ids[i] = e.MachineID
	}
	found, err := s.existing(ctx, ids)
	if err != nil {
		return nil, err
	}
	all = slices.DeleteFunc(all, func(e machine.Expiring) bool { return !found[e.MachineID] })
	slices.SortFunc(all, func(a, b machine.Expiring) int { return strings.Compare(a.MachineID, b.MachineID) })
	return all, nil
}

// Read reads, in one transaction, the slave, its expiring record, the
// decommissioning set and, when key names a request, the receipt under it.
func (s *driver) Read(ctx context.Context, id string, key *change.Receipt) (change.Read, error) {
	type read = change.Read
	if !storable(id) {
		return read{}, nil // no slave can be stored under it
	}
	gets := []types.TransactGetItem{
		{Get: &types.Get{TableName: &s.tables.Slaves, Key: slaveKey(id)}},
		{Get: &types.Get{TableName: &s.tables.Expiring, Key: expiringKey(id)}},
		{Get: &types.Get{TableName: &s.tables.Slaves, Key: slaveKey(limitID)}},
		s.headGet(id),
	}
	named := key != nil && key.Key != ""
	if named {
		gets = append(gets, types.TransactGetItem{Get: &types.Get{TableName: &s.tables.Requests, Key: receiptKey(scopedReceipt(key.Caller, key.Key))}})
	}
	out, err := s.db.TransactGetItems(ctx, &dynamodb.TransactGetItemsInput{TransactItems: gets})
	if err != nil {
		if isCancelled(err) {
			// A transactional read collided with a write in flight.
			return read{}, change.ErrRace
		}
		return read{}, translate("read slave "+id, err)
	}
	var r read
	if item := out.Responses[0].Item; len(item) > 0 {
		var rec slaveRecord
		if err := attributevalue.UnmarshalMap(item, &rec); err != nil {
			return read{}, fmt.Errorf("decode slave %s: %w", id, err)
		}
		if rec.State != "" {
			slave := rec.slave()
			r.Snapshot.Slave, r.Version = &slave, rec.Version
		}
	}
	if item := out.Responses[1].Item; len(item) > 0 {
		var rec expiringRecord
		if err := attributevalue.UnmarshalMap(item, &rec); err != nil {
			return read{}, fmt.Errorf("decode expiring record of %s: %w", id, err)
		}
		e := rec.expiring()
		r.Snapshot.Expiring = &e
	}
	var set limitRecord
	if err := attributevalue.UnmarshalMap(out.Responses[2].Item, &set); err != nil {
		return read{}, fmt.Errorf("decode the decommissioning set: %w", err)
	}
	r.Snapshot.LimitAt = set.LastAt
	r.Head, _ = decodeHead(out.Responses[3].Item)
	if named && len(out.Responses[4].Item) > 0 {
		var rec receiptRecord
		if err := attributevalue.UnmarshalMap(out.Responses[4].Item, &rec); err != nil {
			return read{}, fmt.Errorf("decode receipt of %s: %w", id, err)
		}
		r.Receipt = &change.Receipt{Idempotency: machine.Idempotency{Key: key.Key, Caller: key.Caller, Fingerprint: rec.Fingerprint, At: rec.At},
			Outcome: rec.outcome()}
	}
	return r, nil
}

// Write carries out w, the kind of write its plan names: the expiring
// record alone, the description alone, or a slave created or changed with
// everything that goes with it.
func (s *driver) Write(ctx context.Context, w change.Write) error {
	id, plan := w.ID, w.Plan
	switch plan.Kind {
	case machine.DropsExpiring:
		return s.dropExpiring(ctx, w)
	case machine.Describes:
		return s.redescribe(ctx, id, w.Read, plan, w.Changes)
	case machine.Imports:
		return s.importSlave(ctx, w)
	}
	return s.change(ctx, w)
}

// dropExpiring deletes the expiring record read, with its feed entry and
// the slave's new sequence when the slave exists, conditioned on the
// record's action and on the shard's head.
func (s *driver) dropExpiring(ctx context.Context, w change.Write) error {
	id := w.ID
	items := []types.TransactWriteItem{{Delete: s.deleteExpiring(id, w.Read.Snapshot.Expiring.ActionID)}}
	if len(w.Changes) > 0 {
		items = append(items, types.TransactWriteItem{Update: &types.Update{
			TableName: &s.tables.Slaves, Key: slaveKey(id), UpdateExpression: aws.String("SET #s = :s"),
			ConditionExpression:      aws.String("attribute_exists(id)"),
			ExpressionAttributeNames: map[string]string{"#s": "sequence"}, ExpressionAttributeValues: map[string]types.AttributeValue{":s": num(w.Sequence())},
		}})
	}
	feed, err := s.changeItems(w.Changes)
	if err != nil {
		return err
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: append(items, feed...)})
	if isCancelled(err) {
		return change.ErrRace
	}
	return translate("drop expiring record of "+id, err)
}

// redescribe writes a report's description of a slave whose state it does
// not change, with its feed entry: no history entry, no version bump. It is
// conditioned on the version (the report was decided on that state) and on
// the description it replaces, so that of two concurrent reports neither is
// lost unseen.
func (s *driver) redescribe(ctx context.Context, id string, r change.Read, plan *machine.Plan, cs []change.Change) error {
	u, err := s.updateSlave(id, r, plan, cs[len(cs)-1].Seq)
	if err != nil {
		return err
	}
	feed, err := s.changeItems(cs)
	if err != nil {
		return err
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: append([]types.TransactWriteItem{{Update: u}}, feed...)})
	if isCancelled(err) {
		return change.ErrRace
	}
	return translate("describe slave "+id, err)
}

// change applies a plan with a history entry in one transaction: the slave
// (conditioned on the version read), the history entry, the expiring record,
// the receipt and the decommissioning set change together or not at all.
func (s *driver) change(ctx context.Context, w change.Write) error {
	id, r, plan := w.ID, w.Read, w.Plan
	snap, version := r.Snapshot, r.Version
	items, err := s.stateItems(w)
	if err != nil {
		return err
	}
	if w.Supersedes != 0 {
		prev := snap.Slave.Current
		item, err := attributevalue.MarshalMap(historyRecord{SlaveID: id, Seq: version, State: string(prev.State), Timestamp: prev.Timestamp,
			User: prev.User, Message: prev.Message, ExpiresAt: w.Supersedes})
		if err != nil {
			return fmt.Errorf("encode history of %s: %w", id, err)
		}
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: &s.tables.History, Item: item}})
	}
	switch {
	case plan.PutExpiring != nil:
		item, err := attributevalue.MarshalMap(newExpiringRecord(*plan.PutExpiring, plan.ExpiringKeptFrom()))
		if err != nil {
			return fmt.Errorf("encode expiring record of %s: %w", id, err)
		}
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: &s.tables.Expiring, Item: item, ConditionExpression: aws.String("attribute_not_exists(machineId)")}})
	case plan.DropExpiring:
		items = append(items, types.TransactWriteItem{Delete: s.deleteExpiring(id, snap.Expiring.ActionID)})
	}
	if w.Receipt != nil {
		receipt := newReceipt(id, w.Receipt.Idempotency)
		item, err := attributevalue.MarshalMap(receipt)
		if err != nil {
			return fmt.Errorf("encode receipt of %s: %w", id, err)
		}
		put := s.putReceipt(item, receipt.At)
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: put.TableName, Item: put.Item,
			ConditionExpression: put.ConditionExpression, ExpressionAttributeNames: put.ExpressionAttributeNames, ExpressionAttributeValues: put.ExpressionAttributeValues}})
	}
	limitIndex := -1
	if plan.Join || plan.Leave {
		limitIndex = len(items)
		items = append(items, types.TransactWriteItem{Update: s.moveLimit(id, plan.Join, plan.Limit, snap.LimitAt, plan.SetAt)})
	}
	feed, err := s.changeItems(w.Changes)
	if err != nil {
		return err
	}
	items = append(items, feed...)
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	return writeError(id, err, limitIndex, plan.Join, plan.Limit, snap.LimitAt)
}

// stateItems are the writes of a state change's slave, conditioned on the
// version read (on its absence for a new slave), and of its new history
// entry.
func (s *driver) stateItems(w change.Write) ([]types.TransactWriteItem, error) {
	id, r, plan := w.ID, w.Read, w.Plan
	entry, slave := *plan.Entry, plan.Slave
	next := r.Version + 1
	historyItem, err := attributevalue.MarshalMap(historyRecord{SlaveID: id, Seq: next, State: string(entry.State), Timestamp: entry.Timestamp, User: entry.User, Message: entry.Message})
	if err != nil {
		return nil, fmt.Errorf("encode history of %s: %w", id, err)
	}
	slave.Sequence = w.Sequence()
	var slaveWrite types.TransactWriteItem
	if plan.Kind == machine.Creates {
		item, err := attributevalue.MarshalMap(newSlaveRecord(slave, next))
		if err != nil {
			return nil, fmt.Errorf("encode slave %s: %w", id, err)
		}
		slaveWrite.Put = &types.Put{TableName: &s.tables.Slaves, Item: item, ConditionExpression: aws.String("attribute_not_exists(id)")}
	} else if slaveWrite.Update, err = s.updateSlave(id, r, plan, w.Sequence()); err != nil {
		return nil, err
	}
	return []types.TransactWriteItem{
		slaveWrite,
		{Put: &types.Put{TableName: &s.tables.History, Item: historyItem, ConditionExpression: aws.String("attribute_not_exists(slaveId)")}},
	}, nil
}

// Create creates the slaves of ws, their first history entries and their
// feed entries in one transaction (change.CreateBatch slaves, three items
// each, and a head for each shard they fall in, fit DynamoDB's 100), each
// conditioned on its slave's absence and each head on the value Create
// read just before.
func (s *driver) Create(ctx context.Context, ws []change.Write) error {
	heads, err := s.Heads(ctx)
	if err != nil {
		return err
	}
	var items []types.TransactWriteItem
	var entries [change.FeedShards][]change.Change
	for _, w := range ws {
		if w.Read.Snapshot.Slave != nil {
			return fmt.Errorf("create slave %s: it was read as stored", w.ID)
		}
		w.Changes = slices.Clone(w.Changes)
		for i, c := range w.Changes {
			c.Seq = heads.Seqs[c.Shard] + int64(len(entries[c.Shard])) + 1
			entries[c.Shard] = append(entries[c.Shard], c)
			w.Changes[i] = c
		}
		its, err := s.stateItems(w)
		if err != nil {
			return err
		}
		items = append(items, its...)
	}
	for shard, es := range entries {
		if len(es) == 0 {
			continue
		}
		feed, err := s.feedItems(shard, heads.Seqs[shard], es)
		if err != nil {
			return err
		}
		items = append(items, feed...)
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if isCancelled(err) {
		return change.ErrRace
	}
	return translate(fmt.Sprintf("create %d slaves", len(ws)), err)
}

// updateSlave updates an existing slave in place with the parts of plan's
// slave that the plan names (machine.Plan): its current state and version
// when there is an entry, its description when Describe is set, its
// running-task count when Tasks is set; and its sequence when it is not 0.
// It is conditioned on the version read and, when it writes the
// description, on the description's time read.
func (s *driver) updateSlave(id string, r change.Read, plan *machine.Plan, sequence int64) (*types.Update, error) {
	slave := plan.Slave
	var set, remove []string
	names := map[string]string{}
	values := map[string]types.AttributeValue{":v": num(r.Version)}
	assign := func(attr string, v types.AttributeValue) {
		names["#"+attr] = attr
		if v == nil {
			remove = append(remove, "#"+attr)
			return
		}
		values[":"+attr] = v
		set = append(set, "#"+attr+" = :"+attr)
	}
	optional := func(v string) types.AttributeValue {
		if v == "" {
			return nil
		}
		return str(v)
	}
	optionalCount := func(n *int) types.AttributeValue {
		if n == nil {
			return nil
		}
		return num(int64(*n))
	}
	cond := "version = :v"
	if plan.Kind == machine.Transitions {
		cur := slave.Current
		assign("state", str(string(cur.State)))
		assign("stateTimestamp", num(cur.Timestamp))
		assign("stateUser", optional(cur.User))
		assign("stateMessage", optional(cur.Message))
		assign("version", num(r.Version+1))
	}
	if plan.Describe {
		attrs, err := attributevalue.Marshal(slave.Attributes)
		if err != nil {
			return nil, fmt.Errorf("encode attributes of %s: %w", id, err)
		}
		assign("host", str(slave.Host))
		assign("rackId", str(slave.RackID))
		assign("attributes", attrs)
		assign("resources", optional(string(slave.Resources)))
		assign("describedAt", num(slave.DescribedAt))
		if prev := r.Snapshot.Slave.DescribedAt; prev != 0 {
			cond += " AND describedAt = :was"
			values[":was"] = num(prev)
		} else {
			cond += " AND attribute_not_exists(describedAt)"
		}
	}
	if plan.Tasks {
		assign("runningTasks", optionalCount(slave.RunningTasks))
	}
	if sequence != 0 {
		assign("sequence", num(sequence))
	}
	var clauses []string
	if len(set) > 0 {
		clauses = append(clauses, "SET "+strings.Join(set, ", "))
	}
	if len(remove) > 0 {
		clauses = append(clauses, "REMOVE "+strings.Join(remove, ", "))
	}
	expr := strings.Join(clauses, " ")
	return &types.Update{
		TableName: &s.tables.Slaves, Key: slaveKey(id), UpdateExpression: &expr, ConditionExpression: &cond,
		ExpressionAttributeNames: names, ExpressionAttributeValues: values,
	}, nil
}

// putReceipt stores a receipt unless a live one holds its key: a receipt
// is written once, and only an expired one (TTL deletes lazily) is replaced.
func (s *driver) putReceipt(item map[string]types.AttributeValue, now int64) *dynamodb.PutItemInput {
	return &dynamodb.PutItemInput{
		TableName:                 &s.tables.Requests,
		Item:                      item,
		ConditionExpression:       aws.String("attribute_not_exists(slaveId) OR #at <= :cutoff"),
		ExpressionAttributeNames:  map[string]string{"#at": "at"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":cutoff": num(change.Replaces(now))},
	}
}

// deleteExpiring deletes a slave's expiring record only if it is still the
// one with actionID, so a record created concurrently is never lost.
func (s *driver) deleteExpiring(id, actionID string) *types.Delete {
	return &types.Delete{
		TableName:                 &s.tables.Expiring,
		Key:                       expiringKey(id),
		ConditionExpression:       aws.String("actionId = :a"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":a": str(actionID)},
	}
}

// moveLimit adds id to the decommissioning set (join) or removes it, on
// condition that the set's lastAt is still prevAt, and sets it to at. A
// join is also refused when the set already holds limit (> 0) slaves, so the
// limit holds under concurrent requests.
func (s *driver) moveLimit(id string, join bool, limit int, prevAt, at int64) *types.Update {
	u := &types.Update{
		TableName:        &s.tables.Slaves,
		Key:              slaveKey(limitID),
		UpdateExpression: aws.String("DELETE members :id SET lastAt = :at"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":id": &types.AttributeValueMemberSS{Value: []string{id}}, ":at": num(at),
		},
		ConditionExpression:                 aws.String("attribute_not_exists(lastAt)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if prevAt != 0 {
		u.ConditionExpression = aws.String("lastAt = :prev")
		u.ExpressionAttributeValues[":prev"] = num(prevAt)
	}
	if join {
		u.UpdateExpression = aws.String("ADD members :id SET lastAt = :at")
		if limit > 0 {
			u.ConditionExpression = aws.String(*u.ConditionExpression + " AND (attribute_not_exists(members) OR size(members) < :max)")
			u.ExpressionAttributeValues[":max"] = num(int64(limit))
		}
	}
	return u
}

// leaveLimit removes id from the decommissioning set, for a slave deleted
// with its history (no entry to order).
func (s *driver) leaveLimit(id string) *types.Update {
	return &types.Update{
		TableName:                 &s.tables.Slaves,
		Key:                       slaveKey(limitID),
		UpdateExpression:          aws.String("DELETE members :id"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": &types.AttributeValueMemberSS{Value: []string{id}}},
	}
}

// writeError translates a transaction's failure: a failed condition on the
// decommissioning set whose lastAt is still the one read is the limit; any
// other cancellation is a lost race.
func writeError(id string, err error, limitIndex int, join bool, limit int, limitAt int64) error {
	var cancelled *types.TransactionCanceledException
	if !errors.As(err, &cancelled) {
		return translate("change slave "+id, err)
	}
	reasons := cancelled.CancellationReasons
	if len(reasons) > 0 && aws.ToString(reasons[0].Code) != "None" {
		return change.ErrRace // the slave itself changed: decide again
	}
	if join && limitIndex >= 0 && limitIndex < len(reasons) && aws.ToString(reasons[limitIndex].Code) == "ConditionalCheckFailed" {
		var set limitRecord
		_ = attributevalue.UnmarshalMap(reasons[limitIndex].Item, &set)
		if set.LastAt == limitAt {
			return machine.LimitError(len(set.Members), limit)
		}
	}
	return change.ErrRace
}

// Remember stores a refusal's receipt unless a live one holds its key.
func (s *driver) Remember(ctx context.Context, r change.Receipt) error {
	item, err := attributevalue.MarshalMap(newReceipt("", r.Idempotency).refused(r.Outcome))
	if err != nil {
		return fmt.Errorf("encode receipt: %w", err)
	}
	_, err = s.db.PutItem(ctx, s.putReceipt(item, r.At))
	return translate("remember a refusal", err)
}

// History is Store.History.
func (s *driver) History(ctx context.Context, id string, now time.Time, limit int) ([]machine.Update, error) {
	return (*Store)(s).History(ctx, id, now, limit)
}

// ListByState is Store.ListByState.
func (s *driver) ListByState(ctx context.Context, state machine.State, each func(machine.Slave) error) error {
	return (*Store)(s).ListByState(ctx, state, each)
}

// decodeSlaves decodes a page of the slaves table, leaving out the item
// that is not a slave.
func decodeSlaves(items []map[string]types.AttributeValue) ([]machine.Slave, error) {
	slaves := make([]machine.Slave, 0, len(items))
	for _, item := range items {
		slave, err := decodeSlave(item)
		if err != nil {
			return nil, err
		}
		if slave != nil {
			slaves = append(slaves, *slave)
		}
	}
	return slaves, nil
}

func isCancelled(err error) bool {
	var cancelled *types.TransactionCanceledException
	return errors.As(err, &cancelled)
}

// translate maps SDK failures to fault kinds, keeping the cause for logs:
// the one translation of every adapter (shared/awsfault).
func translate(what string, err error) error {
	return awsfault.Translate(awsfault.DynamoDB, what, err)
}

// storable says whether id can name a stored slave: only an id the domain
// accepts (machine.ValidateID) is ever written, so any other, such as the
// decommissioning set's own key or one longer than DynamoDB accepts as a
// key, names none and is never sent to DynamoDB.
func storable(id string) bool { return machine.ValidateID(id) == nil }

func slaveKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"id": str(id)}
}

func receiptKey(id, key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"slaveId": str(id), "requestKey": str(key)}
}

func expiringKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"machineId": str(id)}
}

func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func num(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: fmt.Sprint(v)}
}
