package inventory

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/fleetops/fleet/shared/exactjson"
	"github.com/fleetops/fleet/shared/machine"
)

// The two forms of a report (docs/behaviour.md "Machine reports"): inline,
// as the detail of a "Machine Report" event, or large, as an object of the
// reports bucket whose creation S3 announces with an "Object Created" event.
const (
	// DetailType is the EventBridge detail-type of an inline machine report.
	DetailType = "Machine Report"
	// ObjectCreated is the detail-type of S3's event for a new object.
	ObjectCreated = "Object Created"
	// ReportsPrefix is where reports are written in the reports bucket; the
	// bucket's lifecycle rule expires them.
	ReportsPrefix = "reports/"
)

// header is what a report says besides its machines.
type header struct {
	Complete    bool `json:"complete"`
	ConfirmLoss bool `json:"confirmLoss"`
}

type inline struct {
	header
	Machines *[]json.RawMessage `json:"machines"`
}

// objectDetail is the part of an "Object Created" event's detail that names
// the object. S3 gives the key as stored, not URL-encoded.
type objectDetail struct {
	Bucket struct {
		Name string `json:"name"`
	} `json:"bucket"`
	Object struct {
		Key string `json:"key"`
	} `json:"object"`
}

type machineJSON struct {
	ID           string            `json:"id"`
	SlaveID      string            `json:"slaveId"`
	Host         string            `json:"host"`
	RackID       string            `json:"rackId"`
	Attributes   map[string]string `json:"attributes"`
	Resources    json.RawMessage   `json:"resources"`
	Lost         bool              `json:"lost"`
	RunningTasks *int              `json:"runningTasks"`
}

// parsed is a report read: each machine entry once, as an observation at
// the report's time or, when only its id could be read, that id and why the
// rest could not.
type parsed struct {
	header
	at         int64
	entries    []entry
	maxEntries int // refuse the report past this many entries; 0: no bound
}

type entry struct {
	observation machine.Observation
	err         error
}

// add reads the report's next machine entry. Every form (inline, direct
// invocation, report object) reads every entry here, so they validate
// alike: an entry whose id cannot be read, or is not valid text, refuses
// the whole report; one with a valid id and an unreadable description
// (text that is not UTF-8 in any other field included) is kept as that id
// and its error, to be skipped and counted.
func (p *parsed) add(raw json.RawMessage) error {
	if p.maxEntries > 0 && len(p.entries) == p.maxEntries {
		return &TooLargeError{What: "machine entries", Limit: int64(p.maxEntries)}
	}
	o, err := observation(raw, p.at)
	if err == nil {
		// encoding/json has read bytes that are not text as U+FFFD: the
		// description as stored would not be the one sent.
		if textErr := exactjson.ValidText(raw); textErr != nil {
			err = fmt.Errorf("machine %s: the entry is not valid text: %w", o.ID, textErr)
		}
	}
	if err != nil {
		id, idErr := entryID(raw)
		if idErr == nil {
			idErr = machine.ValidateID(id)
		}
		if idErr != nil {
			return fmt.Errorf("machine report entry %d: %w", len(p.entries), idErr)
		}
		o = machine.Observation{ID: id}
	}
	p.entries = append(p.entries, entry{observation: o, err: err})
	return nil
}

// addOversized counts an entry over MaxValueBytes that values read past:
// it is skipped like an entry whose description cannot be stored, which it
// cannot be (a DynamoDB item holds 400 KB), and kept as its id, so that a
// complete report does not take the machine for absent. Without a valid id
// it refuses the report, as an entry of any size would.
func (p *parsed) addOversized(big *oversized) error {
	if p.maxEntries > 0 && len(p.entries) == p.maxEntries {
		return &TooLargeError{What: "machine entries", Limit: int64(p.maxEntries)}
	}
	id, err := entryID(oversizedIDs(big))
	if err == nil {
		err = machine.ValidateID(id)
	}
	if err != nil {
		return fmt.Errorf("machine report entry %d (%d bytes, over %d): %w", len(p.entries), big.size, MaxValueBytes, err)
	}
	p.entries = append(p.entries, entry{observation: machine.Observation{ID: id},
		err: fmt.Errorf("machine %s: the entry is %d bytes, over the %d an entry may take", id, big.size, MaxValueBytes)})
	return nil
}

// oversizedIDs is an object of the id members values kept of an oversized
// entry, for entryID to read as it reads any entry.
func oversizedIDs(big *oversized) json.RawMessage {
	members := map[string]json.RawMessage{}
	if big.id != nil {
		members["id"] = big.id
	}
	if big.slaveID != nil {
		members["slaveId"] = big.slaveID
	}
	raw, _ := json.Marshal(members)
	return raw
}

// reportTime is when a report was made: the event's time, never later than
// now (a sender's skewed clock must not stamp history in the future, nor
// make every later report look stale), or now when the event has none.
func reportTime(t time.Time, now int64) int64 {
	if t.IsZero() {
		return now
	}
	return min(t.UnixMilli(), now)
}

// parseInline reads an inline report made at at: a "Machine Report"
// event's detail, or a report sent by a direct invocation.
func parseInline(body json.RawMessage, at int64) (parsed, error) {
	var rep inline
	if err := exactjson.Unmarshal(body, &rep); err != nil {
		return parsed{}, fmt.Errorf("machine report detail: %w", err)
	}
	if rep.Machines == nil {
		return parsed{}, errors.New(`machine report has no "machines" list`)
	}
	p := parsed{header: rep.header, at: at, entries: make([]entry, 0, len(*rep.Machines))}
	for _, raw := range *rep.Machines {
		if err := p.add(raw); err != nil {
			return parsed{}, err
		}
	}
	return p, nil
}

// JSONLinesSuffixes are the object names of the JSON Lines form; any other
// name is read as one JSON object. Either may be gzip-compressed.
var JSONLinesSuffixes = []string{".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz"}

// gzipMagic starts every gzip stream.
var gzipMagic = []byte{0x1f, 0x8b}

// parseObject reads the report object named key from body as a stream, one
// entry at a time: the object is never held whole, only what each entry
// becomes, and reading stops as soon as it goes over bound. An entry over
// MaxValueBytes is read past without being held (values), and skipped. The
// object is gzip-compressed when it starts as gzip does, whatever its name
// or Content-Encoding say.
func parseObject(key string, body io.Reader, at int64, bound Bound) (parsed, error) {
	r := bufio.NewReaderSize(body, 64<<10)
	var in io.Reader = r
	if magic, _ := r.Peek(len(gzipMagic)); bytes.Equal(magic, gzipMagic) {
		z, err := gzip.NewReader(r)
		if err != nil {
			return parsed{}, fmt.Errorf("machine report %s: %w", key, err)
		}
		defer z.Close()
		in = z
	}
	vals := newValues(&boundedReader{r: in, max: bound.Bytes})
	p := parsed{at: at, maxEntries: bound.Entries}
	var err error
	if hasSuffix(key, JSONLinesSuffixes) {
		err = p.readLines(vals)
	} else {
		err = p.readObject(vals)
	}
	var tooLarge *TooLargeError
	if errors.As(err, &tooLarge) {
		tooLarge.Key, tooLarge.Bound = key, bound
		return parsed{}, tooLarge
	}
	if err != nil {
		return parsed{}, fmt.Errorf("machine report %s: %w", key, err)
	}
	return p, nil
}

func hasSuffix(key string, suffixes []string) bool {
	for _, s := range suffixes {
		if strings.HasSuffix(key, s) {
			return true
		}
	}
	return false
}

// readObject reads the JSON form: the inline report's detail,
// {"complete":…,"confirmLoss":…,"machines":[…]}, its members in any order.
// Keys match exactly, as exactjson reads the inline form; other members are
// skipped, however large.
func (p *parsed) readObject(vals *values) error {
	if err := vals.expect('{'); err != nil {
		return err
	}
	machines := false
	for i := 0; ; i++ {
		c, err := vals.peek()
		if err != nil {
			return unexpectedEOF(err)
		}
		if c == '}' {
			vals.next()
			break
		}
		if i > 0 {
			if err := vals.expect(','); err != nil {
				return err
			}
		}
		raw, err := vals.small("a key")
		if err != nil {
			return err
		}
		var key string
		if err := json.Unmarshal(raw, &key); err != nil {
			return fmt.Errorf("a key: %w", err)
		}
		if err := vals.expect(':'); err != nil {
			return err
		}
		switch key {
		case "complete", "confirmLoss":
			raw, err := vals.small(key)
			if err != nil {
				return err
			}
			flag := &p.Complete
			if key == "confirmLoss" {
				flag = &p.ConfirmLoss
			}
			if err := json.Unmarshal(raw, flag); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
		case "machines":
			if machines {
				return errors.New(`"machines" appears twice`)
			}
			machines = true
			if err := p.readEntries(vals); err != nil {
				return err
			}
		default:
			if _, _, err := vals.value(); err != nil {
				return err
			}
		}
	}
	if !machines {
		return errors.New(`machine report has no "machines" list`)
	}
	return vals.end()
}

// readEntries reads the machines array, one entry at a time.
func (p *parsed) readEntries(vals *values) error {
	if c, err := vals.peek(); err != nil || c != '[' {
		return errors.New(`machine report has no "machines" list`)
	}
	vals.next()
	for i := 0; ; i++ {
		c, err := vals.peek()
		if err != nil {
			return unexpectedEOF(err)
		}
		if c == ']' {
			_, err := vals.next()
			return err
		}
		if i > 0 {
			if err := vals.expect(','); err != nil {
				return err
			}
		}
		if err := p.addNext(vals); err != nil {
			return err
		}
	}
}

// readLines reads the JSON Lines form: a header object ({"complete":…,
// "confirmLoss":…}, no machines) and then one machine entry per line.
func (p *parsed) readLines(vals *values) error {
	first, err := vals.small("the header line")
	if err != nil {
		return fmt.Errorf("header line: %w", err)
	}
	var h struct {
		header
		Machines json.RawMessage `json:"machines"`
	}
	if err := exactjson.Unmarshal(first, &h); err != nil {
		return fmt.Errorf("header line: %w", err)
	}
	if h.Machines != nil {
		return errors.New(`the header line of a JSON Lines report holds no "machines": one machine follows per line`)
	}
	p.header = h.header
	for {
		switch _, err := vals.peek(); {
		case err == io.EOF:
			return nil
		case err != nil:
			return err
		}
		if err := p.addNext(vals); err != nil {
			return err
		}
	}
}

// addNext reads the next machine entry: whole, or, over MaxValueBytes, as
// its id alone, to be skipped and counted.
func (p *parsed) addNext(vals *values) error {
	raw, big, err := vals.value()
	if err != nil {
		return err
	}
	if big == nil {
		return p.add(raw)
	}
	return p.addOversized(big)
}

func observation(raw json.RawMessage, at int64) (machine.Observation, error) {
	var m machineJSON
	if err := exactjson.Unmarshal(raw, &m); err != nil {
		return machine.Observation{}, err
	}
	id := m.ID
	if id == "" {
		id = m.SlaveID
	}
	if err := machine.ValidateID(id); err != nil {
		return machine.Observation{}, err
	}
	res := bytes.TrimSpace(m.Resources)
	if len(res) == 0 || string(res) == "null" {
		res = nil
	} else if res[0] != '{' {
		return machine.Observation{}, fmt.Errorf("machine %s: resources must be an object", id)
	}
	if n := m.RunningTasks; n != nil && *n < 0 {
		return machine.Observation{}, fmt.Errorf("machine %s: runningTasks must not be negative, got %d", id, *n)
	}
	o := machine.Observation{
		ID: id, Host: m.Host, RackID: m.RackID, Attributes: m.Attributes, Resources: res,
		Lost: m.Lost, RunningTasks: m.RunningTasks, At: at,
	}
	return o, o.CheckSize()
}

// entryID reads the id of a machine entry that may be malformed otherwise;
// "" when the entry has none (or is not an object). It fails when the id is
// not valid text: encoding/json would read it as another id.
func entryID(raw json.RawMessage) (string, error) {
	var m struct {
		ID      json.RawMessage `json:"id"`
		SlaveID json.RawMessage `json:"slaveId"`
	}
	if exactjson.Unmarshal(raw, &m) != nil {
		return "", nil
	}
	var id, slaveID string
	_ = json.Unmarshal(m.ID, &id)
	_ = json.Unmarshal(m.SlaveID, &slaveID)
	text := m.ID
	if id == "" {
		id, text = slaveID, m.SlaveID
	}
	if err := exactjson.ValidText(text); err != nil {
		return "", fmt.Errorf("machine id %q is not valid text: %w", text, err)
	}
	return id, nil
}
