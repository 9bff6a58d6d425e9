package dynamo

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetops/fleet/shared/machine"
)

func TestASlaveDecodesByHandAsAttributevalueDecodesIt(t *testing.T) {
	full := machine.Slave{
		ID: "node-1", FirstSeenAt: 1_793_491_200_000, DescribedAt: 1_793_491_260_000,
		Current: machine.Update{SlaveID: "node-1", State: machine.Frozen, Timestamp: 1_793_491_300_000, User: "ops", Message: "<maintenance> & \"more\""},
		Host:    "node-1.internal", RackID: "rack-é",
		Attributes:   map[string]string{"zone": "a", "<k>": "漢字"},
		Resources:    json.RawMessage(`{"cpus":16}`),
		RunningTasks: new(3),
	}
	bare := machine.Slave{ID: "node-2", Current: machine.Update{SlaveID: "node-2", State: machine.Active}}
	for _, tt := range []struct {
		name  string
		slave machine.Slave
	}{
		{"a slave with every field", full},
		{"a slave without attributes, resources, user or message", bare},
	} {
		t.Run(tt.name, func(t *testing.T) {
			item, err := attributevalue.MarshalMap(newSlaveRecord(tt.slave, 7))
			if err != nil {
				t.Fatal(err)
			}
			var rec slaveRecord
			if err := attributevalue.UnmarshalMap(item, &rec); err != nil {
				t.Fatal(err)
			}
			want := rec.slave()
			got, err := decodeSlave(item)
			if err != nil || got == nil || !reflect.DeepEqual(*got, want) {
				t.Errorf("got %+v (%v), want %+v", got, err, want)
			}
		})
	}
	t.Run("the decommissioning set is no slave", func(t *testing.T) {
		item, err := attributevalue.MarshalMap(limitRecord{Members: []string{"node-1"}, LastAt: 1})
		if err != nil {
			t.Fatal(err)
		}
		item["id"] = str(limitID)
		if got, err := decodeSlave(item); got != nil || err != nil {
			t.Errorf("got %+v (%v), want none", got, err)
		}
	})
	for _, tt := range []struct {
		name, attr string
		value      types.AttributeValue
	}{
		{"a state that is a number", "state", num(1)},
		{"a timestamp that is a string", "stateTimestamp", str("soon")},
		{"a timestamp that is not a whole number", "stateTimestamp", &types.AttributeValueMemberN{Value: "1.5"}},
		{"attributes that are a string", "attributes", str("zone=a")},
		{"a running-task count that is a string", "runningTasks", str("3")},
		{"an attribute that is a number", "attributes", &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"cpus": num(16)}}},
	} {
		t.Run("an item with "+tt.name+" is an error", func(t *testing.T) {
			item, err := attributevalue.MarshalMap(newSlaveRecord(full, 1))
			if err != nil {
				t.Fatal(err)
			}
			item[tt.attr] = tt.value
			got, err := decodeSlave(item)
			if err == nil || !strings.Contains(err.Error(), "node-1") || !strings.Contains(err.Error(), tt.attr) {
				t.Errorf("got %+v (%v), want an error naming the slave and %s", got, err, tt.attr)
			}
		})
	}
}
