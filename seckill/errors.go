package seckill

import "fmt"

// PublicError is an error of a known kind (one of the sentinels above) that
// carries a sentence the caller may read: what was wrong with what they sent,
// or what to do next. The gateway shows Message instead of its row's generic
// one; an error without one never shows its text, so only sentences written
// for people, holding nothing the caller did not send, go in Message.
type PublicError struct {
	Kind    error  // the sentinel that picks the answer, e.g. ErrInvalidInput
	Message string // the sentence shown to the caller
	Cause   error  // optional: what went wrong underneath, for logs and errors.Is
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
