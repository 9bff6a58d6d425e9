package dynamo

import (
	"encoding/json"
	"fmt"
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

// The hand decoder must keep up with slaveRecord: every field, filled with a
// value no other field has, is written by attributevalue through its
// dynamodbav tag and must come back from decodeSlaveRecord, as it comes back
// from attributevalue.UnmarshalMap. A field added to the record without its
// decoder line fails here; a field of a kind this test cannot fill fails
// too, so that the test grows with the record.
func TestEveryFieldOfTheSlaveRecordHasItsDecoderLine(t *testing.T) {
	var want slaveRecord
	v := reflect.ValueOf(&want).Elem()
	for i := range v.NumField() {
		f, field := v.Field(i), v.Type().Field(i)
		if !fill(f, i) {
			t.Fatalf("field %s (%s) has a kind this test cannot fill: teach fill, and decodeSlaveRecord, its kind", field.Name, field.Type)
		}
	}
	item, err := attributevalue.MarshalMap(want)
	if err != nil {
		t.Fatal(err)
	}
	if len(item) != v.NumField() {
		t.Fatalf("the record wrote %d attributes for %d fields, want one each (a field without a dynamodbav name?)", len(item), v.NumField())
	}
	var viaSDK slaveRecord
	if err := attributevalue.UnmarshalMap(item, &viaSDK); err != nil {
		t.Fatal(err)
	}
	got, err := decodeSlaveRecord(item)
	if err != nil {
		t.Fatal(err)
	}
	gv, sv := reflect.ValueOf(got), reflect.ValueOf(viaSDK)
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if !reflect.DeepEqual(gv.Field(i).Interface(), v.Field(i).Interface()) {
			t.Errorf("%s: decoded %s, want %s written: does decodeSlaveRecord have its line?", name, show(gv.Field(i)), show(v.Field(i)))
		}
		if !reflect.DeepEqual(gv.Field(i).Interface(), sv.Field(i).Interface()) {
			t.Errorf("%s: decoded %s, attributevalue decodes %s", name, show(gv.Field(i)), show(sv.Field(i)))
		}
	}
}

// Every field of a slave is stored: filled with values no other field has,
// a slave goes through its record, the item and the decoder and comes back
// whole, so a field added to machine.Slave without its place in slaveRecord
// fails here.
func TestEveryFieldOfASlaveIsStored(t *testing.T) {
	var want machine.Slave
	v := reflect.ValueOf(&want).Elem()
	for i := range v.NumField() {
		if !fill(v.Field(i), i) {
			t.Fatalf("field %s (%s) has a kind this test cannot fill: teach fill its kind", v.Type().Field(i).Name, v.Type().Field(i).Type)
		}
	}
	want.Current.SlaveID = want.ID // one attribute holds both
	want.Current.State = machine.Frozen
	want.Resources = json.RawMessage(`{"cpus":16}`)
	item, err := attributevalue.MarshalMap(newSlaveRecord(want, 1))
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeSlave(item)
	if err != nil || got == nil {
		t.Fatalf("got %v (%v), want the slave", got, err)
	}
	gv := reflect.ValueOf(*got)
	for i := range v.NumField() {
		if !reflect.DeepEqual(gv.Field(i).Interface(), v.Field(i).Interface()) {
			t.Errorf("%s: got %s back, want %s stored: do newSlaveRecord and slave carry it?", v.Type().Field(i).Name, show(gv.Field(i)), show(v.Field(i)))
		}
	}
}

// fill sets f to a value that is not its zero value and, but for a bool
// (true), that no other field gets (i is the field's index), and reports
// whether it knows f's kind.
func fill(f reflect.Value, i int) bool {
	switch f.Kind() {
	case reflect.String:
		f.SetString(fmt.Sprintf("value-%d", i))
	case reflect.Int, reflect.Int64:
		f.SetInt(int64(1000 + i))
	case reflect.Bool:
		f.SetBool(true)
	case reflect.Pointer:
		elem := reflect.New(f.Type().Elem())
		if !fill(elem.Elem(), i) {
			return false
		}
		f.Set(elem)
	case reflect.Struct:
		for j := range f.NumField() {
			if !fill(f.Field(j), i*100+j) {
				return false
			}
		}
	case reflect.Slice:
		if f.Type().Elem().Kind() != reflect.Uint8 {
			return false
		}
		f.SetBytes([]byte(fmt.Sprintf("%d", i)))
	case reflect.Map:
		if f.Type().Key().Kind() != reflect.String {
			return false
		}
		m := reflect.MakeMap(f.Type())
		e := reflect.New(f.Type().Elem()).Elem()
		if !fill(e, i) {
			return false
		}
		m.SetMapIndex(reflect.ValueOf(fmt.Sprintf("key-%d", i)), e)
		f.Set(m)
	default:
		return false
	}
	return true
}

func show(v reflect.Value) string {
	if v.Kind() == reflect.Pointer && !v.IsNil() {
		return fmt.Sprintf("&%v", v.Elem().Interface())
	}
	return fmt.Sprintf("%#v", v.Interface())
}
