package app

import (
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// mask is what a password is shown as.
const mask = "****"

// escapePassword is the fix for a URL that does not parse because of its
// password, for error messages.
const escapePassword = "percent-escape a '/', '?', '#', '@' or ':' of a URL's password as %2F, %3F, %23, %40, %3A"

// maskURL hides every password a connection string can carry and keeps the
// rest, which operators need to see which server a process talks to: the
// userinfo of a URL (postgres://app:****@db, unix://:****@/run/redis.sock),
// a password or sslpassword query parameter, however its name is cased or
// escaped (postgres://db/app?password=****, redis://db?password=****), and a
// password or sslpassword of a key=value DSN (host=db password=**** dbname=app),
// quoted or not.
func maskURL(s string) string {
	spans := secretSpans(s)
	if len(spans) == 0 {
		return s
	}
	var b strings.Builder
	last := 0
	for _, sp := range spans {
		b.WriteString(s[last:sp[0]])
		b.WriteString(mask)
		last = sp[1]
	}
	b.WriteString(s[last:])
	return b.String()
}

// urlError is err, which came of the connection string raw of the
// variable, told without any piece of a password raw holds, however short.
// A client quotes the string it cannot read, or only the part where it
// stopped, and a password it misreads (a '/' ends a URL's userinfo early)
// turns up cut into pieces as a port, a path, a database or a host it
// dials: no replacement finds a piece of one or two characters in a
// message. So err's words are used only when the client read the password
// whole, and the fault is otherwise told by reading the masked string with
// read, the client's own reading: where the masked string fails too, the
// fault is outside the password and its error says which, with nothing to
// hide; where it reads and raw does not, or reads otherwise, the password
// is the fault, and the message says so and how to write it. The cause
// stays in the chain for errors.Is and errors.As.
func urlError(variable, raw string, err error, read readConn) error {
	if len(secretSpans(raw)) == 0 {
		return &maskedError{msg: variable + ": " + err.Error(), err: err}
	}
	masked := maskURL(raw)
	rawReading, rawErr := read(raw)
	maskedReading, maskedErr := read(masked)
	var msg string
	switch {
	case maskedErr != nil:
		msg = maskedErr.Error()
	case rawErr != nil || rawReading != maskedReading:
		msg = masked + ": " + passwordFault(raw)
	default:
		// Read whole, the password is in no part the client names (the
		// host, the user, the database are the masked string's); a client
		// that quotes the whole string is shown the masked one.
		msg = strings.ReplaceAll(err.Error(), strconv.Quote(raw), strconv.Quote(masked))
		msg = strings.ReplaceAll(msg, raw, masked)
	}
	return &maskedError{msg: variable + ": " + msg, err: err}
}

// readConn is a client's reading of a connection string: where it
// connects, as whom and to what, told without the password (two strings
// that differ only in their passwords read the same when the client reads
// each password whole), or why it cannot read it.
type readConn func(s string) (reading string, err error)

// passwordFault says what is wrong with a password that a client cannot
// read or reads as something else, and how to write it.
func passwordFault(raw string) string {
	if urlScheme.MatchString(raw) {
		return "the password holds a character that must be percent-encoded: '/', '?', '#', '@' or ':' (as %2F, %3F, %23, %40, %3A; a '%' as %25, a space as %20)"
	}
	return `the password cannot be read as written: put it in single quotes, with \' for a quote and \\ for a backslash in it`
}

// maskedError is an error whose message is rewritten without a secret.
type maskedError struct {
	msg string
	err error
}

func (e *maskedError) Error() string { return e.msg }
func (e *maskedError) Unwrap() error { return e.err }

// secretSpans returns the [start, end) byte ranges of s that are passwords,
// in order and not overlapping.
//
// A URL's userinfo is found without url.Parse, because the strings that
// most need masking are the ones it cannot read: it runs from "://" to the
// LAST '@' of the string, since a password written unescaped may hold '@',
// '/', '?' or '#', and the host never does. An '@' in a query parameter
// therefore makes the mask take the host too: that shows too little, never
// a password.
func secretSpans(s string) [][2]int {
	loc := urlScheme.FindStringIndex(s)
	if loc == nil {
		var spans [][2]int
		for _, m := range dsnPassword.FindAllStringSubmatchIndex(s, -1) {
			spans = append(spans, [2]int{m[2], m[3]})
		}
		return spans
	}
	var spans [][2]int
	start := loc[1] // just after "://"
	hostStart := start
	if at := strings.LastIndexByte(s[start:], '@'); at >= 0 {
		if colon := strings.IndexByte(s[start:start+at], ':'); colon >= 0 {
			spans = append(spans, [2]int{start + colon + 1, start + at})
		}
		hostStart = start + at + 1
	}
	q := strings.IndexByte(s[hostStart:], '?')
	if q < 0 {
		return spans
	}
	pos := hostStart + q + 1
	end := len(s)
	if h := strings.IndexByte(s[pos:], '#'); h >= 0 {
		end = pos + h
	}
	for pos < end {
		param := s[pos:end]
		if amp := strings.IndexByte(param, '&'); amp >= 0 {
			param = param[:amp]
		}
		if key, _, ok := strings.Cut(param, "="); ok && isPasswordKey(key) {
			spans = append(spans, [2]int{pos + len(key) + 1, pos + len(param)})
		}
		pos += len(param) + 1
	}
	return spans
}

// isPasswordKey reports whether a URL query key names a password, read as
// the clients read it: percent-decoded, any case.
func isPasswordKey(key string) bool {
	if k, err := url.QueryUnescape(key); err == nil {
		key = k
	}
	key = strings.ToLower(key)
	return key == "password" || key == "sslpassword"
}

var (
	// urlScheme is the start of a URL: a scheme (RFC 3986: a letter, then
	// letters, digits, '+', '-', '.') and "://". Anything else, even with
	// a "://" inside a value, is a key=value DSN.
	urlScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)
	// dsnPassword is a password of a key=value DSN: a quoted value (with
	// backslash escapes, as libpq reads it; unterminated, it runs to the
	// end) or everything to the next space.
	dsnPassword = regexp.MustCompile(`(?i)\b(?:ssl)?password\s*=\s*('(?:[^'\\]|\\.)*(?:'|$)|\S*)`)
)
