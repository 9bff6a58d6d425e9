// Command hello is the function lambdarun's tests run: it answers an event
// {"name": ...} with a greeting and what the runtime told it, and misbehaves
// on request ({"fail": true}, {"panic": true}, {"sleep": "5s"}, {"exit": 3},
// {"big": true}, {"allocateMB": 200}). {"bytes": n} answers a JSON string of
// exactly n bytes. {"streamBytes": n} streams, in the response streaming
// format, a 200 whose body is n bytes of 'x'; {"streamFail": true} streams
// one whose body fails after its first bytes.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

type event struct {
	Name  string `json:"name"`
	Fail  bool   `json:"fail"`
	Panic bool   `json:"panic"`
	Sleep string `json:"sleep"`
	Exit  int    `json:"exit"`
	Big   bool   `json:"big"`
	Bytes int    `json:"bytes"`
	// StreamBytes and StreamFail answer in the response streaming format.
	StreamBytes int  `json:"streamBytes"`
	StreamFail  bool `json:"streamFail"`
	// AllocateMB holds that much memory, touched, while it answers.
	AllocateMB int `json:"allocateMB"`
}

type answer struct {
	Greeting    string            `json:"greeting"`
	RequestID   string            `json:"requestId"`
	FunctionARN string            `json:"functionArn"`
	HasDeadline bool              `json:"hasDeadline"`
	Env         map[string]string `json:"env"`
	Padding     string            `json:"padding,omitempty"`
}

func handle(ctx context.Context, e event) (any, error) {
	fmt.Fprintln(os.Stderr, "hello: handling", e.Name)
	switch {
	case e.Fail:
		return answer{}, errors.New("asked to fail")
	case e.Panic:
		panic("asked to panic")
	case e.Exit != 0:
		os.Exit(e.Exit)
	case e.Sleep != "":
		d, _ := time.ParseDuration(e.Sleep)
		time.Sleep(d)
	case e.StreamBytes > 0:
		return &events.LambdaFunctionURLStreamingResponse{StatusCode: 200, Headers: map[string]string{"Content-Type": "text/plain"},
			Body: strings.NewReader(strings.Repeat("x", e.StreamBytes))}, nil
	case e.StreamFail:
		return &events.LambdaFunctionURLStreamingResponse{StatusCode: 200, Body: io.MultiReader(strings.NewReader("[1,2,"), failing{})}, nil
	case e.Bytes >= 2:
		// aws-lambda-go posts a raw message as it is, without a newline.
		return json.RawMessage(`"` + strings.Repeat("x", e.Bytes-2) + `"`), nil
	}
	held := make([]byte, e.AllocateMB<<20)
	for i := 0; i < len(held); i += 4096 {
		held[i] = 1
	}
	lc, _ := lambdacontext.FromContext(ctx)
	_, hasDeadline := ctx.Deadline()
	a := answer{
		Greeting:    "hello " + e.Name,
		RequestID:   lc.AwsRequestID,
		FunctionARN: lc.InvokedFunctionArn,
		HasDeadline: hasDeadline,
		Env:         map[string]string{},
	}
	for _, k := range []string{"AWS_LAMBDA_FUNCTION_NAME", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "AWS_REGION", "_X_AMZN_TRACE_ID", "GREETING_STYLE", "AWS_PROFILE"} {
		if v, ok := os.LookupEnv(k); ok {
			a.Env[k] = v
		}
	}
	if e.Big {
		a.Padding = strings.Repeat("x", 7<<20)
	}
	runtime.KeepAlive(held)
	return a, nil
}

func main() {
	if os.Getenv("HELLO_INIT_FAIL") != "" {
		fmt.Fprintln(os.Stderr, "hello: cannot start: HELLO_INIT_FAIL is set")
		os.Exit(2)
	}
	lambda.Start(handle)
}

// failing is a body that fails when read.
type failing struct{}

func (failing) Read([]byte) (int, error) { return 0, errors.New("asked to fail half way") }
