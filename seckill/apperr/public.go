package apperr

import (
	"fmt"
	"time"
)

// PublicError is an error of a known kind (one the gateway's error table
// maps: a kind of this package or a domain's, such as seckill.ErrNotAdmitted)
// that carries a sentence the caller may read: what was wrong with what they
// sent, or what to do next. The gateway shows Message instead of its row's generic
// one; an error without one never shows its text, so only sentences written
// for people, holding nothing the caller did not send, go in Message.
type PublicError struct {
	Kind    error  // the sentinel that picks the answer, e.g. ErrInvalidInput
	Message string // the sentence shown to the caller
	Cause   error  // optional: what went wrong underneath, for logs and errors.Is
	// Fields names each bad field of an ErrInvalidInput (see Fields).
	Fields []FieldError
}

// Public returns an error of kind whose message the caller may read.
func Public(kind error, message string) error {
	return &PublicError{Kind: kind, Message: message}
}

// Invalidf returns ErrInvalidInput with a sentence, formatted as by
// fmt.Sprintf, that the caller may read.
func Invalidf(format string, args ...any) error {
	return &PublicError{Kind: ErrInvalidInput, Message: fmt.Sprintf(format, args...)}
}

// Error reads "kind: message[: cause]", as fmt.Errorf("%w: ...") would.
func (e *PublicError) Error() string {
	s := e.Kind.Error() + ": " + e.Message
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Unwrap gives errors.Is and errors.As the kind and the cause.
func (e *PublicError) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.Kind, e.Cause}
	}
	return []error{e.Kind}
}

// PublicMessage is the sentence the gateway shows the caller.
func (e *PublicError) PublicMessage() string { return e.Message }

// retryAfterError carries how long a client should wait.
type retryAfterError struct {
	err   error
	after time.Duration
}

func (e *retryAfterError) Error() string             { return e.err.Error() }
func (e *retryAfterError) Unwrap() error             { return e.err }
func (e *retryAfterError) RetryAfter() time.Duration { return e.after }

// WithRetryAfter returns err carrying a Retry-After of d, for the steps that know
// when the client may come back (a rate limiter's reset, a breaker's timeout).
func WithRetryAfter(err error, d time.Duration) error {
	return &retryAfterError{err: err, after: d}
}
