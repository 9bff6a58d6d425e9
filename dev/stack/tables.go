package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetops/fleet/shared/dynamo"
)

// LocalName names a table after its logical id ("SlavesTable"): the local
// default, also used by dev/env.local.json.
func LocalName(logicalID string) string { return logicalID }

// Tables are the template's tables as Up creates them (LocalName), for a
// dynamo.Store over the local stack.
var Tables = dynamo.Tables{Slaves: "SlavesTable", History: "HistoryTable", Expiring: "ExpiringTable", Requests: "RequestsTable", Changes: "ChangesTable"}

// CreateTables creates every AWS::DynamoDB::Table of the template that does not
// exist yet, naming it name(logicalID), from the properties that shape
// behaviour: AttributeDefinitions, KeySchema, Global- and
// LocalSecondaryIndexes, BillingMode, ProvisionedThroughput,
// StreamSpecification and TimeToLiveSpecification (applied with
// UpdateTimeToLive). Encryption, backups and tags mean nothing to an emulator
// and are skipped. It is idempotent: an existing table is kept, after checking
// that its key schema and indexes match the template's.
func (t *Template) CreateTables(ctx context.Context, client *dynamodb.Client, name func(logicalID string) string) error {
	for _, id := range t.Tables() {
		spec, err := t.tableSpec(id)
		if err != nil {
			return fmt.Errorf("table %s: %w", id, err)
		}
		if err := ensureTable(ctx, client, name(id), spec); err != nil {
			return fmt.Errorf("table %s (%s): %w", id, name(id), err)
		}
	}
	return nil
}

// RecreateTables deletes the template's tables named by name and creates
// them again, empty. A table already gone counts as deleted: an earlier call
// stopped between its deletes and its creates, or a DeleteTable the SDK
// retried had been applied by its first attempt.
func (t *Template) RecreateTables(ctx context.Context, client *dynamodb.Client, name func(logicalID string) string) error {
	for _, id := range t.Tables() {
		_, err := client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name(id))})
		var gone *types.ResourceNotFoundException
		if err != nil && !errors.As(err, &gone) {
			return fmt.Errorf("table %s (%s): delete: %w", id, name(id), err)
		}
	}
	return t.CreateTables(ctx, client, name)
}

// tableSpec is the part of AWS::DynamoDB::Table's properties CreateTables uses.
type tableSpec struct {
	AttributeDefinitions []struct {
		AttributeName string
		AttributeType string
	}
	KeySchema              []keyElement
	GlobalSecondaryIndexes []indexSpec
	LocalSecondaryIndexes  []indexSpec
	BillingMode            string
	ProvisionedThroughput  *throughput
	StreamSpecification    *struct {
		StreamViewType string
	}
	TimeToLiveSpecification *struct {
		AttributeName string
		Enabled       flexBool
	}
}

type keyElement struct {
	AttributeName string
	KeyType       string
}

type indexSpec struct {
	IndexName  string
	KeySchema  []keyElement
	Projection struct {
		ProjectionType   string
		NonKeyAttributes []string
	}
	ProvisionedThroughput *throughput
}

type throughput struct {
	ReadCapacityUnits  flexInt
	WriteCapacityUnits flexInt
}

// flexInt and flexBool accept a JSON number (or boolean) or its string form,
// as CloudFormation does.
type flexInt int64

func (n *flexInt) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		b = []byte(s)
	}
	v, err := strconv.ParseInt(string(b), 10, 64)
	*n = flexInt(v)
	return err
}

type flexBool bool

func (f *flexBool) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		b = []byte(s)
	}
	v, err := strconv.ParseBool(string(b))
	*f = flexBool(v)
	return err
}

func (t *Template) tableSpec(id string) (tableSpec, error) {
	keep := map[string]any{}
	for _, k := range []string{
		"AttributeDefinitions", "KeySchema", "GlobalSecondaryIndexes", "LocalSecondaryIndexes",
		"BillingMode", "ProvisionedThroughput", "StreamSpecification", "TimeToLiveSpecification",
	} {
		if v, ok := t.Resources[id].Properties[k]; ok {
			keep[k] = v
		}
	}
	resolved, err := t.resolve(keep, nil)
	if err != nil {
		return tableSpec{}, err
	}
	data, err := json.Marshal(resolved)
	if err != nil {
		return tableSpec{}, err
	}
	var spec tableSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		return tableSpec{}, err
	}
	if len(spec.KeySchema) == 0 {
		return tableSpec{}, errors.New("no KeySchema")
	}
	return spec, nil
}

func ensureTable(ctx context.Context, client *dynamodb.Client, name string, spec tableSpec) error {
	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	var notFound *types.ResourceNotFoundException
	switch {
	case errors.As(err, &notFound):
		if err := createTable(ctx, client, name, spec); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("describe: %w", err)
	default:
		if err := sameShape(out.Table, spec); err != nil {
			return fmt.Errorf("exists with another shape (%w); delete it or restart the emulator", err)
		}
	}

	if ttl := spec.TimeToLiveSpecification; ttl != nil && bool(ttl.Enabled) {
		return enableTTL(ctx, client, name, ttl.AttributeName)
	}
	return nil
}

func createTable(ctx context.Context, client *dynamodb.Client, name string, spec tableSpec) error {
	in := &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		KeySchema:   keySchema(spec.KeySchema),
		BillingMode: types.BillingMode(spec.BillingMode),
	}
	if in.BillingMode == "" {
		in.BillingMode = types.BillingModeProvisioned // CloudFormation's default
	}
	for _, a := range spec.AttributeDefinitions {
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{
			AttributeName: aws.String(a.AttributeName),
			AttributeType: types.ScalarAttributeType(a.AttributeType),
		})
	}
	in.ProvisionedThroughput = provisioned(spec.ProvisionedThroughput)
	for _, ix := range spec.GlobalSecondaryIndexes {
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, types.GlobalSecondaryIndex{
			IndexName:             aws.String(ix.IndexName),
			KeySchema:             keySchema(ix.KeySchema),
			Projection:            projection(ix),
			ProvisionedThroughput: provisioned(ix.ProvisionedThroughput),
		})
	}
	for _, ix := range spec.LocalSecondaryIndexes {
		in.LocalSecondaryIndexes = append(in.LocalSecondaryIndexes, types.LocalSecondaryIndex{
			IndexName:  aws.String(ix.IndexName),
			KeySchema:  keySchema(ix.KeySchema),
			Projection: projection(ix),
		})
	}
	if s := spec.StreamSpecification; s != nil {
		in.StreamSpecification = &types.StreamSpecification{
			StreamEnabled:  aws.Bool(true),
			StreamViewType: types.StreamViewType(s.StreamViewType),
		}
	}

	_, err := client.CreateTable(ctx, in)
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) { // in use: another process created it meanwhile
		return fmt.Errorf("create: %w", err)
	}
	w := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 100*time.Millisecond, time.Second
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, 30*time.Second); err != nil {
		return fmt.Errorf("wait until active: %w", err)
	}
	return nil
}

func enableTTL(ctx context.Context, client *dynamodb.Client, name, attribute string) error {
	out, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)})
	if err != nil {
		return fmt.Errorf("describe TTL: %w", err)
	}
	if d := out.TimeToLiveDescription; d != nil && aws.ToString(d.AttributeName) == attribute &&
		(d.TimeToLiveStatus == types.TimeToLiveStatusEnabled || d.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
		return nil
	}
	_, err = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(name),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(attribute),
			Enabled:       aws.Bool(true),
		},
	})
	if err != nil {
		return fmt.Errorf("enable TTL on %s: %w", attribute, err)
	}
	return nil
}

// sameShape reports how an existing table differs from spec in what the code
// depends on: the key schema and the names and keys of its indexes.
func sameShape(table *types.TableDescription, spec tableSpec) error {
	if !slices.Equal(keyStrings(table.KeySchema), specKeyStrings(spec.KeySchema)) {
		return fmt.Errorf("key schema %v, template %v", keyStrings(table.KeySchema), specKeyStrings(spec.KeySchema))
	}
	have := map[string][]string{}
	for _, ix := range table.GlobalSecondaryIndexes {
		have[aws.ToString(ix.IndexName)] = keyStrings(ix.KeySchema)
	}
	for _, ix := range table.LocalSecondaryIndexes {
		have[aws.ToString(ix.IndexName)] = keyStrings(ix.KeySchema)
	}
	for _, ix := range slices.Concat(spec.GlobalSecondaryIndexes, spec.LocalSecondaryIndexes) {
		got, ok := have[ix.IndexName]
		if !ok {
			return fmt.Errorf("index %s missing", ix.IndexName)
		}
		if want := specKeyStrings(ix.KeySchema); !slices.Equal(got, want) {
			return fmt.Errorf("index %s keys %v, template %v", ix.IndexName, got, want)
		}
	}
	return nil
}

func keyStrings(ks []types.KeySchemaElement) []string {
	var s []string
	for _, k := range ks {
		s = append(s, aws.ToString(k.AttributeName)+" "+string(k.KeyType))
	}
	return s
}

func specKeyStrings(ks []keyElement) []string {
	var s []string
	for _, k := range ks {
		s = append(s, k.AttributeName+" "+k.KeyType)
	}
	return s
}

func keySchema(ks []keyElement) []types.KeySchemaElement {
	out := make([]types.KeySchemaElement, 0, len(ks))
	for _, k := range ks {
		out = append(out, types.KeySchemaElement{
			AttributeName: aws.String(k.AttributeName),
			KeyType:       types.KeyType(k.KeyType),
		})
	}
	return out
}

func projection(ix indexSpec) *types.Projection {
	p := &types.Projection{ProjectionType: types.ProjectionType(ix.Projection.ProjectionType)}
	if len(ix.Projection.NonKeyAttributes) > 0 {
		p.NonKeyAttributes = ix.Projection.NonKeyAttributes
	}
	return p
}

func provisioned(t *throughput) *types.ProvisionedThroughput {
	if t == nil {
		return nil
	}
	return &types.ProvisionedThroughput{
		ReadCapacityUnits:  aws.Int64(int64(t.ReadCapacityUnits)),
		WriteCapacityUnits: aws.Int64(int64(t.WriteCapacityUnits)),
	}
}

// TableShape returns what the code depends on of the template's table
// logicalID: its key schema ("id HASH", ...), the key schema of each of its
// indexes by name, and its TTL attribute ("" for none), for comparing with a
// table some other tool created from the template.
func (t *Template) TableShape(logicalID string) (keys []string, indexes map[string][]string, ttl string, err error) {
	spec, err := t.tableSpec(logicalID)
	if err != nil {
		return nil, nil, "", fmt.Errorf("table %s: %w", logicalID, err)
	}
	indexes = map[string][]string{}
	for _, ix := range slices.Concat(spec.GlobalSecondaryIndexes, spec.LocalSecondaryIndexes) {
		indexes[ix.IndexName] = specKeyStrings(ix.KeySchema)
	}
	if s := spec.TimeToLiveSpecification; s != nil && bool(s.Enabled) {
		ttl = s.AttributeName
	}
	return specKeyStrings(spec.KeySchema), indexes, ttl, nil
}
