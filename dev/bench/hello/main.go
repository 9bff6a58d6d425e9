// Command hello is the smallest aws-lambda-go function: the reference the
// cold start figures of `make bench` are measured against. It reads no
// configuration and builds no client, so its init is the Go runtime and
// aws-lambda-go alone.
package main

import (
	"context"
	"encoding/json"

	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	lambda.Start(func(ctx context.Context, e json.RawMessage) (string, error) { return "hello", nil })
}
