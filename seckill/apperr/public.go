package apperr

import (
	"fmt"
	"strings"
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
	// Format and Args are what Message was made from (fmt.Sprintf), kept
	// so the gateway can say it in the caller's language: Format is the
	// English sentence its translations are found by. An empty Format
	// means Message itself, with no arguments.
	Format string
	Args   []any
}

// Public returns an error of kind whose message the caller may read.
// message is a constant English sentence: it is also the key of its
// translations (gateway/i18n), so a sentence built at run time goes
// through Publicf instead.
func Public(kind error, message string) error {
	return &PublicError{Kind: kind, Message: message}
}

// Publicf returns an error of kind with a sentence, formatted as by
// fmt.Sprintf, that the caller may read; format and args are kept for its
// translation.
func Publicf(kind error, format string, args ...any) error {
	return &PublicError{Kind: kind, Message: fmt.Sprintf(format, args...), Format: format, Args: args}
}

// Invalidf returns ErrInvalidInput with a sentence, formatted as by
// fmt.Sprintf, that the caller may read.
func Invalidf(format string, args ...any) error {
	return Publicf(ErrInvalidInput, format, args...)
}

// Printer says a format with its arguments in some language, as
// fmt.Sprintf says it in English (gateway/i18n implements it).
type Printer func(format string, args ...any) string

// MessageIn is the sentence in the language p speaks: every bad field's
// reason, each said by p, when the error names fields; else the message.
func (e *PublicError) MessageIn(p Printer, sep string) string {
	if len(e.Fields) > 0 {
		reasons := make([]string, len(e.Fields))
		for i, f := range e.Fields {
			reasons[i] = f.ReasonIn(p)
		}
		return strings.Join(reasons, sep)
	}
	if e.Format == "" {
		return p(e.Message)
	}
	return p(e.Format, e.Args...)
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

// PublicMessage is the sentence in English, its source language (the
// gateway says it in the caller's through MessageIn).
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
