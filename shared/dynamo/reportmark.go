package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// reportID is the key of the item in the slaves table that holds the time
// and id of the newest report started (docs/tables.md). Like the
// decommissioning set, it has no state attribute, so reads of slaves skip
// it, and no slave id starts with '#'.
const reportID = "#report"

// StartReport records that the report named report, made at at
// (epoch ms), has started, unless a report made later has: the item only
// moves forward. A report that finds a newer one recorded is not refused
// here; its absences are, when it finishes (NewestReport).
func (s *Store) StartReport(ctx context.Context, at int64, report string) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                &s.tables.Slaves,
		Key:                      slaveKey(reportID),
		UpdateExpression:         aws.String("SET #at = :at, #report = :report"),
		ConditionExpression:      aws.String("attribute_not_exists(#at) OR #at <= :at"),
		ExpressionAttributeNames: map[string]string{"#at": "startedAt", "#report": "report"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":at": num(at), ":report": str(report),
		},
	})
	var older *types.ConditionalCheckFailedException
	if errors.As(err, &older) {
		return nil
	}
	return translate("record the start of report "+report, err)
}

// NewestReport returns the time and id of the newest report
// started, 0 and "" when none has. It reads strongly: a report that
// started a moment ago must be seen.
func (s *Store) NewestReport(ctx context.Context) (int64, string, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.tables.Slaves, Key: slaveKey(reportID), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return 0, "", translate("read the newest report", err)
	}
	at, report := out.Item["startedAt"], out.Item["report"]
	if at == nil {
		return 0, "", nil
	}
	n, ok := at.(*types.AttributeValueMemberN)
	id, _ := report.(*types.AttributeValueMemberS)
	if !ok || id == nil {
		return 0, "", errors.New("the newest report item is malformed")
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return 0, "", fmt.Errorf("the newest report item: %w", err)
	}
	return v, id.Value, nil
}
