package api

import "time"

// ErrorBody is every error answer (the `Error` object):
// {"error":{"code":"...","message":"..."}}. The codes and the statuses they
// go with are the gateway's error table (gateway/errors.go).
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is what went wrong: a code a program may switch on and a
// sentence a person may read.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Fields names every bad field of an invalid_input, one each.
	Fields []FieldError `json:"fields,omitempty"`
	// RetryAt is when a refusal that knows its end (unpaid_limit) ends.
	RetryAt *time.Time `json:"retry_at,omitempty"`
}

// FieldError is one bad field of a request: a JSON pointer into the body
// (such as "/waiting_room/admit_per_second"; "" for the body as a whole) or
// the name of a parameter outside it ("limit", "Idempotency-Key"), and why.
type FieldError struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}
