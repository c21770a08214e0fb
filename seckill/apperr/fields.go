package apperr

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// FieldError is one bad field of a request: where it is and what is wrong
// with it. Field is a JSON pointer into the body (RFC 6901, such as
// "/waiting_room/admit_per_second"; "" is the body as a whole), or, for a
// value outside the body, the parameter's name as gateway/openapi.yaml
// spells it ("limit", "cursor", "id", "Idempotency-Key"): a pointer always
// starts with "/", so the two never meet.
type FieldError struct {
	Field  string
	Reason string
	// Format and Args are what Reason was made from, kept for its
	// translation (see PublicError.Format); empty Format: Reason itself.
	Format string
	Args   []any
}

// ReasonIn is the reason in the language p speaks.
func (f FieldError) ReasonIn(p Printer) string {
	if f.Format == "" {
		return p(f.Reason)
	}
	return p(f.Format, f.Args...)
}

// Fields gathers every bad field of one request, so a caller learns of all
// of them at once rather than one per attempt.
type Fields []FieldError

// Addf records a bad field with a sentence, formatted as by fmt.Sprintf,
// that the caller may read.
func (f *Fields) Addf(field, format string, args ...any) {
	*f = append(*f, FieldError{Field: field, Reason: fmt.Sprintf(format, args...), Format: format, Args: args})
}

// Err is nil when no field was bad, else ErrInvalidInput carrying every bad
// field; its message is their reasons, in the order they were found.
func (f Fields) Err() error {
	if len(f) == 0 {
		return nil
	}
	reasons := make([]string, len(f))
	for i, fe := range f {
		reasons[i] = fe.Reason
	}
	return &PublicError{Kind: ErrInvalidInput, Message: strings.Join(reasons, "; "), Fields: f}
}

// InvalidField returns ErrInvalidInput for one bad field with a sentence,
// formatted as by fmt.Sprintf, that the caller may read.
func InvalidField(field, format string, args ...any) error {
	var f Fields
	f.Addf(field, format, args...)
	return f.Err()
}

// FieldsOf returns the bad fields err carries, or nil.
func FieldsOf(err error) []FieldError {
	var pe *PublicError
	if errors.As(err, &pe) {
		return pe.Fields
	}
	return nil
}

// retryAtError carries the moment a refusal ends.
type retryAtError struct {
	err error
	at  time.Time
}

func (e *retryAtError) Error() string      { return e.err.Error() }
func (e *retryAtError) Unwrap() error      { return e.err }
func (e *retryAtError) RetryAt() time.Time { return e.at }

// WithRetryAt returns err carrying the moment the caller may try again, for
// refusals that know it (a shopper's unpaid holds leaving the window): the
// gateway answers it as a field of its own, so no client parses the message.
func WithRetryAt(err error, at time.Time) error {
	return &retryAtError{err: err, at: at}
}

// Merge adds the bad fields err names that f does not name yet (a field is
// reported once, by the first check that found it). An err that names no
// field is returned as it is, for the caller to return: it is not a bad field.
func (f *Fields) Merge(err error) error {
	named := FieldsOf(err)
	if err != nil && len(named) == 0 {
		return err
	}
	for _, fe := range named {
		if !f.Has(fe.Field) {
			*f = append(*f, fe)
		}
	}
	return nil
}

// Has says whether field is named already.
func (f Fields) Has(field string) bool {
	for _, fe := range f {
		if fe.Field == field {
			return true
		}
	}
	return false
}
