package dynamo

import (
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetops/fleet/shared/machine"
)

// decodeSlave decodes an item of the slaves table. An item without a state
// is the decommissioning set, not a slave: nil.
func decodeSlave(item map[string]types.AttributeValue) (*machine.Slave, error) {
	if len(item) == 0 {
		return nil, nil
	}
	r, err := decodeSlaveRecord(item)
	if err != nil {
		return nil, err
	}
	if r.State == "" {
		return nil, nil
	}
	s := r.slave()
	return &s, nil
}

// decodeSlaveRecord decodes an item of the slaves table the way
// attributevalue.UnmarshalMap into a slaveRecord would, by hand: the list of
// a large fleet decodes every slave, and reflection cost a third of its CPU
// (BENCHMARKS.md, "fleet scale"). Every field of slaveRecord needs its line
// here; a test fills every field through its dynamodbav tag and fails on a
// field this leaves out.
func decodeSlaveRecord(item map[string]types.AttributeValue) (slaveRecord, error) {
	var r slaveRecord
	d := recordDecoder{item: item}
	r.ID = d.str("id")
	r.State = d.str("state")
	r.StateTimestamp = d.num("stateTimestamp")
	r.StateUser = d.str("stateUser")
	r.StateMessage = d.str("stateMessage")
	r.FirstSeenAt = d.num("firstSeenAt")
	r.Host = d.str("host")
	r.RackID = d.str("rackId")
	r.Attributes = d.strMap("attributes")
	r.Resources = d.str("resources")
	r.DescribedAt = d.num("describedAt")
	r.RunningTasks = d.optInt("runningTasks")
	r.Version = d.num("version")
	r.Sequence = d.num("sequence")
	if d.err != nil {
		return slaveRecord{}, fmt.Errorf("decode slave %s: %w", r.ID, d.err)
	}
	return r, nil
}

// recordDecoder reads attributes of one item, keeping the first error. An
// absent attribute, or a NULL, is the zero value.
type recordDecoder struct {
	item map[string]types.AttributeValue
	err  error
}

func (d *recordDecoder) fail(name string, v types.AttributeValue, want string) {
	if d.err == nil {
		d.err = fmt.Errorf("attribute %s is a %T, want %s", name, v, want)
	}
}

func (d *recordDecoder) str(name string) string {
	switch v := d.item[name].(type) {
	case nil, *types.AttributeValueMemberNULL:
		return ""
	case *types.AttributeValueMemberS:
		return v.Value
	default:
		d.fail(name, v, "string")
		return ""
	}
}

func (d *recordDecoder) num(name string) int64 {
	switch v := d.item[name].(type) {
	case nil, *types.AttributeValueMemberNULL:
		return 0
	case *types.AttributeValueMemberN:
		n, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil && d.err == nil {
			d.err = fmt.Errorf("attribute %s: %w", name, err)
		}
		return n
	default:
		d.fail(name, v, "number")
		return 0
	}
}

// optInt reads a number that may be absent: nil then.
func (d *recordDecoder) optInt(name string) *int {
	switch d.item[name].(type) {
	case nil, *types.AttributeValueMemberNULL:
		return nil
	}
	return new(int(d.num(name)))
}

func (d *recordDecoder) strMap(name string) map[string]string {
	switch v := d.item[name].(type) {
	case nil, *types.AttributeValueMemberNULL:
		return nil
	case *types.AttributeValueMemberM:
		out := make(map[string]string, len(v.Value))
		for k, e := range v.Value {
			s, ok := e.(*types.AttributeValueMemberS)
			if !ok {
				d.fail(name+"."+k, e, "string")
				return nil
			}
			out[k] = s.Value
		}
		return out
	default:
		d.fail(name, v, "map")
		return nil
	}
}
