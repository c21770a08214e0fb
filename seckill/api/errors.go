package api

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
}
