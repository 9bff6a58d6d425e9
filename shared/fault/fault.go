// Package fault is the service's error vocabulary. Domain and adapter code
// return these kinds; exactly one function (web.Status) maps them to HTTP.
package fault

import (
	"errors"
	"fmt"
)

// Kind classifies an error the way a caller can act on it.
type Kind int

const (
	KindInternal Kind = iota
	KindInvalid
	KindUnauthorized
	KindForbidden
	KindNotFound
	KindConflict
	KindTooLarge
	KindUnavailable
	KindTimeout
	KindGone
	KindPreconditionFailed
)

// Error is a failure with a message safe to show the caller.
type Error struct {
	Kind    Kind
	Message string
	// Now is where the slave of a failed precondition is now; nil for
	// every other failure.
	Now *Now
}

// Now is the current sequence and state of a slave that moved since the
// caller saw it.
type Now struct {
	Sequence int64
	State    string
}

func (e *Error) Error() string { return e.Message }

// Invalid reports bad input (400).
func Invalid(format string, args ...any) error { return newf(KindInvalid, format, args) }

// Unauthorized reports a missing identity (401).
func Unauthorized(msg string) error { return &Error{Kind: KindUnauthorized, Message: msg} }

// Forbidden reports an identity without the needed group (403).
func Forbidden(msg string) error { return &Error{Kind: KindForbidden, Message: msg} }

// NotFound reports a missing resource (404).
func NotFound(format string, args ...any) error { return newf(KindNotFound, format, args) }

// Conflict reports a change that the current state does not allow (409).
func Conflict(format string, args ...any) error { return newf(KindConflict, format, args) }

// TooLarge reports an oversized request (413).
func TooLarge(format string, args ...any) error { return newf(KindTooLarge, format, args) }

// Unavailable reports a backend that is throttling or down (503).
func Unavailable(format string, args ...any) error { return newf(KindUnavailable, format, args) }

// Timeout reports a backend that did not answer in time (504).
func Timeout(format string, args ...any) error { return newf(KindTimeout, format, args) }

// Gone reports something that existed and no longer does, such as a change
// feed cursor older than the feed's retention (410).
func Gone(format string, args ...any) error { return newf(KindGone, format, args) }

// PreconditionFailed reports a conditional change of a slave that is no
// longer as the caller saw it (412), with where it is now.
func PreconditionFailed(now Now, format string, args ...any) error {
	err := newf(KindPreconditionFailed, format, args).(*Error)
	err.Now = &now
	return err
}

func newf(k Kind, format string, args []any) error {
	if len(args) == 0 {
		return &Error{Kind: k, Message: format}
	}
	return &Error{Kind: k, Message: fmt.Sprintf(format, args...)}
}

// KindOf returns the kind of the first *Error in err's chain, or KindInternal.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindInternal
}

// Message returns the caller-safe message of err, or "" for internal errors.
func Message(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return ""
}
