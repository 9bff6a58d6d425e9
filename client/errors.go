package client

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
)

// Error is an error answer of the API: its HTTP status and the body's code
// and message (every error body is {"code", "message"}; an answer that is
// not one, from a proxy say, keeps its status and a message made of its
// first bytes).
type Error struct {
	Status    int    // the HTTP status
	Code      int    // the body's code, the status unless a proxy answered
	Message   string // the body's message
	Operation string // the operationId of openapi.yaml, such as freezeSlave
	// Sequence and State are where the slave is now, for a 412: a change
	// with IfMatch whose slave moved since.
	Sequence int64
	State    State
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %d %s", e.Operation, e.Status, e.Message)
}

// StatusOf returns the HTTP status of an *Error in err's chain, 0 when there
// is none (a network failure, a cancelled context).
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// IsNotFound reports a 404: no such slave, or no log buckets configured.
func IsNotFound(err error) bool { return StatusOf(err) == http.StatusNotFound }

// IsConflict reports a 409: the slave's state refuses the change, it
// already has an expiring change, or an Idempotency-Key was reused.
func IsConflict(err error) bool { return StatusOf(err) == http.StatusConflict }

// IsMoved reports a 412: a change sent with IfMatch found the slave moved
// since that sequence, and changed nothing; the *Error says where it is.
func IsMoved(err error) bool { return StatusOf(err) == http.StatusPreconditionFailed }

// IsInvalid reports a 400: a bad parameter or body, or the decommission
// limit.
func IsInvalid(err error) bool { return StatusOf(err) == http.StatusBadRequest }

// IsAuth reports a 401 or 403.
func IsAuth(err error) bool {
	s := StatusOf(err)
	return s == http.StatusUnauthorized || s == http.StatusForbidden
}

// IsUnavailable reports what retrying later may fix: a 429, 503 or 504
// answer, or no answer at all (StatusOf 0 with a transport error).
func IsUnavailable(err error) bool {
	switch StatusOf(err) {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	case 0:
		var t *TransportError
		return errors.As(err, &t)
	}
	return false
}

// TransportError is a request that got no answer: the endpoint is
// unreachable, the connection broke, or an attempt timed out.
type TransportError struct {
	Operation string
	Err       error
}

func (e *TransportError) Error() string { return fmt.Sprintf("%s: %v", e.Operation, e.Err) }

func (e *TransportError) Unwrap() error { return e.Err }

// NotAPIError is an answer that does not come from the fleet API: an HTML
// page, an S3 XML error, a proxy's text. The endpoint is likely wrong.
type NotAPIError struct {
	Operation   string
	Status      int    // the HTTP status
	ContentType string // the answer's Content-Type
}

func (e *NotAPIError) Error() string {
	what := e.ContentType
	if what == "" {
		what = "no content type"
	}
	return fmt.Sprintf("%s: the endpoint answered %d with %s, not the fleet API's JSON (is it the fleet API's base URL?)", e.Operation, e.Status, what)
}

// Redact removes the query string from the URL of a *url.Error (what
// http.Client returns): the query of a presigned link is its credential,
// and it must not reach a terminal or a log through an error. Other errors
// are returned as they are.
func Redact(err error) error {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err
	}
	u, perr := url.Parse(ue.URL)
	if perr != nil {
		return &url.Error{Op: ue.Op, URL: "(a URL)", Err: ue.Err}
	}
	if u.RawQuery != "" {
		u.RawQuery = "(query hidden)"
	}
	u.User = nil
	return &url.Error{Op: ue.Op, URL: u.String(), Err: ue.Err}
}
