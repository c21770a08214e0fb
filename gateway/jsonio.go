package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/flashsale/seckill/seckill/apperr"
)

// decodeJSON reads the body into dst strictly: one JSON value of the right
// shape, no unknown fields, nothing after it. An empty body is allowed only
// when allowEmpty (dst then keeps its zero value). Every failure wraps
// apperr.ErrInvalidInput with a sentence about what was wrong. The decoded
// strings are fresh copies, never views of fasthttp's buffer.
func decodeJSON(c *fiber.Ctx, dst any, allowEmpty bool) error {
	body := c.Body()
	if len(body) == 0 && allowEmpty {
		return nil
	}
	if len(bytes.TrimSpace(body)) == 0 {
		// White space alone is not JSON: an optional body is absent or
		// an object, as gateway/openapi.yaml declares it.
		if allowEmpty {
			return invalid("the body holds only white space: send a JSON object, or no body at all")
		}
		return invalid("the request needs a JSON body")
	}
	if ct := c.Get(fiber.HeaderContentType); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != fiber.MIMEApplicationJSON && !strings.HasSuffix(mt, "+json")) {
			return invalid("send the body as JSON (Content-Type: application/json)")
		}
	}
	if err := refuseNullsAndRepeats(body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return describeJSONError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalid("the body must hold exactly one JSON object")
	}
	return nil
}

// nullableField says whether a request field is one gateway/openapi.yaml
// declares nullable: NewVoucher.waiting_room (null is no waiting room),
// WaitingRoom.adaptive (null is a fixed rate), NewVoucher.entry (null
// takes every shopper) and PushSubscription.expirationTime (a browser's
// PushSubscription.toJSON() sends null for none).
func nullableField(name string) bool {
	return name == "waiting_room" || name == "adaptive" || name == "entry" || name == "expirationTime"
}

// refuseNullsAndRepeats refuses a JSON null where gateway/openapi.yaml does
// not declare one, and an object that names a field twice.
//
// encoding/json reads null into a struct or a field as nothing at all, so a
// body of null was taken for an empty one and {"quantity": null} for a
// quantity of 1, though every request body is an object and its fields are
// not nullable (the API fuzzer of `make conformance` found both).
//
// It also takes the last of a field's values without a word, so
// {"add_stock": 1, "add_stock": 5} added 5 though a reader of the request
// (a proxy, a log, an operator) may see 1: a request that says two things
// is refused, never guessed at. The decoder matches field names without
// regard to case, so "add_stock" and "ADD_STOCK" are the same field here too.
//
// Bodies that are not valid JSON are left to the decoder, which words that.
func refuseNullsAndRepeats(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	var stack []frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // the end, or a syntax error for the decoder to word
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{':
				if len(stack) > 0 && stack[len(stack)-1].object {
					stack[len(stack)-1].wantKey = true
				}
				stack = append(stack, frame{object: true, wantKey: true})
			case '[':
				if len(stack) > 0 && stack[len(stack)-1].object {
					stack[len(stack)-1].wantKey = true
				}
				stack = append(stack, frame{})
			default:
				stack = stack[:len(stack)-1]
			}
			continue
		}
		if len(stack) == 0 {
			if tok == nil {
				return invalid("the body must be a JSON object")
			}
			continue
		}
		top := &stack[len(stack)-1]
		if top.object && top.wantKey {
			top.key, _ = tok.(string)
			top.wantKey = false
			if top.seen == nil {
				top.seen = map[string]string{}
			}
			folded := foldFieldName(top.key)
			if first, ok := top.seen[folded]; ok {
				return apperr.InvalidField(stackPointer(stack), "field %q appears more than once: send each field once", truncate(first, 64))
			}
			top.seen[folded] = top.key
			continue
		}
		if tok == nil && !(top.object && nullableField(top.key)) {
			if top.object {
				return apperr.InvalidField(stackPointer(stack), "field %q must not be null", truncate(top.key, 64))
			}
			return invalid("the body must not hold null")
		}
		if top.object {
			top.wantKey = true
		}
	}
}

// stackPointer is the JSON pointer to the field being read: the keys of
// the objects open, an array's place standing as "-" (its index is not
// counted; a pointer to the array is as close as the caller needs).
func stackPointer(stack []frame) string {
	path := make([]string, 0, len(stack))
	for _, f := range stack {
		if f.object {
			path = append(path, f.key)
		}
	}
	return jsonPointer(path...)
}

// frame is one open object or array of refuseNullsAndRepeats's walk.
type frame struct {
	object  bool
	wantKey bool
	key     string
	seen    map[string]string // the object's field names, folded, to their first spelling
}

// foldFieldName folds a field name as encoding/json matches names to
// fields: without regard to case, the long s (U+017F) being s and the
// Kelvin sign (U+212A) k, as Unicode's simple folding has them.
func foldFieldName(name string) string {
	return strings.ToLower(strings.ToUpper(name))
}

// describeJSONError is ErrInvalidInput saying which field was wrong (a
// JSON pointer, "" for the body as a whole) and what was wrong with it in
// the caller's words, never the decoder's internals.
func describeJSONError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn), errors.Is(err, io.ErrUnexpectedEOF):
		return apperr.InvalidField("", "the body is not valid JSON")
	case errors.As(err, &typ):
		if typ.Field == "" {
			return apperr.InvalidField("", "the body must be a JSON object")
		}
		return apperr.InvalidField(jsonPointer(strings.Split(typ.Field, ".")...), "field %q must be %s",
			truncate(typ.Field, 64), jsonKind(typ.Type))
	}
	// encoding/json reports an unknown field (DisallowUnknownFields) with a
	// plain error, no type to match, so its text is the only place the
	// field's name is; a decoder that words it otherwise falls to the
	// generic sentence below.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if unq, qerr := strconv.Unquote(name); qerr == nil {
			return apperr.InvalidField(jsonPointer(unq), "unknown field %s", truncate(name, 66))
		}
		return apperr.InvalidField("", "unknown field %s", truncate(name, 66))
	}
	return apperr.InvalidField("", "the body has a value of the wrong type or an unknown field")
}

// jsonPointer is the RFC 6901 pointer to the field at path in the body.
func jsonPointer(path ...string) string {
	var b strings.Builder
	for _, p := range path {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(p))
	}
	return b.String()
}

// jsonKind names a Go type as the JSON the caller should have sent.
func jsonKind(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "a different type"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number in range"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list"
	}
	return "a JSON object"
}

// parseID reads a path id: the canonical decimal spelling of a positive
// int64. It is checked before any store is touched.
// The refusal is built only when needed: built up front it was two
// allocations on every buy.
func parseID(raw, field, what string) (int64, error) {
	bad := func() error { return apperr.InvalidField(field, "%s must be a positive decimal number", what) }
	if raw == "" || len(raw) > 19 || raw[0] == '0' {
		return 0, bad()
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] < '0' || raw[i] > '9' {
			return 0, bad()
		}
	}
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id <= 0 {
		return 0, bad()
	}
	return id, nil
}

// parseTime reads an RFC 3339 time and returns it in UTC.
func parseTime(raw, field string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, raw)
	if err != nil {
		return time.Time{}, apperr.InvalidField("/"+field, "%s must be an RFC 3339 time, like 2030-01-02T15:04:05Z", field)
	}
	return t.UTC(), nil
}

func idString(id int64) string { return strconv.FormatInt(id, 10) }
