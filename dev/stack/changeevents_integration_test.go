//go:build integration

package stack

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// A stream shows committed writes only: a transaction that writes one item
// and then fails a condition on another leaves no record of either, so the
// local delivery publishes no event for a change that never was.
func TestARolledBackTransactionLeavesNoStreamRecord(t *testing.T) {
	ctx := context.Background()
	moto := emptyMoto(t)
	client := DynamoDBClient(moto.Endpoint)
	tpl := parse(t, pkTable("T")+"      StreamSpecification: {StreamViewType: NEW_IMAGE}\n")
	if err := tpl.CreateTables(ctx, client, LocalName); err != nil {
		t.Fatal(err)
	}
	item := func(pk string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}}
	}
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("T"), Item: item("committed")}); err != nil {
		t.Fatal(err)
	}
	_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String("T"), Item: item("undone")}},
		{ConditionCheck: &types.ConditionCheck{TableName: aws.String("T"), Key: item("absent"), ConditionExpression: aws.String("attribute_exists(pk)")}},
	}})
	var canceled *types.TransactionCanceledException
	if !errors.As(err, &canceled) {
		t.Fatalf("got %v, want the transaction canceled", err)
	}

	table, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("T")})
	if err != nil {
		t.Fatal(err)
	}
	streams := dynamodbstreams.NewFromConfig(localConfig(), func(o *dynamodbstreams.Options) { o.BaseEndpoint = aws.String(moto.Endpoint) })
	stream, err := streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: table.Table.LatestStreamArn})
	if err != nil {
		t.Fatal(err)
	}
	it, err := streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
		StreamArn: table.Table.LatestStreamArn, ShardId: stream.StreamDescription.Shards[0].ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon,
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range out.Records {
		keys = append(keys, string(r.EventName)+" "+r.Dynamodb.Keys["pk"].(*streamtypes.AttributeValueMemberS).Value)
	}
	if len(keys) != 1 || keys[0] != "INSERT committed" {
		t.Errorf("got stream records %q, want only [INSERT committed]", keys)
	}
}
