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

// urlError is err, which a client gave for the connection string raw of the
// variable, told without any password raw holds. Clients quote the string
// they could not read (Go's url.Error does, so go-redis's and pgx's errors
// do), and the string they cannot read is the one whose password nothing
// has masked yet: a password with a '/', '?' or '#' is the usual cause. Each
// quote of raw becomes the masked string, then every password raw holds is
// masked wherever else the message shows it (pgx's own masking is best
// effort, and a message may quote only a piece of the string). The cause
// stays in the chain for errors.Is and errors.As.
func urlError(variable, raw string, err error) error {
	msg := err.Error()
	masked := maskURL(raw)
	msg = strings.ReplaceAll(msg, strconv.Quote(raw), strconv.Quote(masked))
	msg = strings.ReplaceAll(msg, raw, masked)
	for _, pw := range secretsOf(raw) {
		msg = strings.ReplaceAll(msg, pw, mask)
	}
	return &maskedError{msg: variable + ": " + msg, err: err}
}

// maskedError is an error whose message is rewritten without a secret.
type maskedError struct {
	msg string
	err error
}

func (e *maskedError) Error() string { return e.msg }
func (e *maskedError) Unwrap() error { return e.err }

// secretsOf returns every password of s in each spelling a message may quote
// it in: as written, unquoted or unescaped, Go-quoted, and the pieces of it
// between the characters a parser stops at, which is all a message quotes
// when it names the bad part (url.Parse's `invalid port ":pa" after host`
// for "redis://u:pa/ss@db"). Pieces shorter than minSecretPiece are left:
// replacing them everywhere would mask half the message and they tell
// little. Longest first, so that a password is masked whole before a piece
// of it is.
func secretsOf(s string) []string {
	var out []string
	var add func(v string)
	add = func(v string) {
		if len(v) < minSecretPiece || v == mask {
			return
		}
		out = append(out, v)
		if q := strconv.Quote(v); q[1:len(q)-1] != v {
			out = append(out, q[1:len(q)-1])
		}
		if u, err := url.PathUnescape(v); err == nil && u != v {
			add(u)
		}
		if pieces := strings.FieldsFunc(v, isSecretSeparator); len(pieces) > 1 || (len(pieces) == 1 && pieces[0] != v) {
			for _, p := range pieces {
				add(p)
			}
		}
	}
	for _, sp := range secretSpans(s) {
		v := s[sp[0]:sp[1]]
		add(v)
		if len(v) >= 2 && v[0] == '\'' {
			inner := strings.TrimSuffix(v[1:], "'")
			add(inner)
			add(strings.NewReplacer(`\'`, `'`, `\\`, `\`).Replace(inner))
		}
	}
	// Longest first: "ab" must not be masked inside "abc" before "abc" is.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && len(out[j]) > len(out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

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

// minSecretPiece is the shortest piece of a password urlError masks
// wherever a message shows it.
const minSecretPiece = 3

// isSecretSeparator reports whether a parser may stop at r inside a
// password: URL delimiters, quotes, escapes and spaces.
func isSecretSeparator(r rune) bool {
	return strings.ContainsRune(":/?#@[]&='\"\\%", r) || r == ' ' || r == '\t' || r == '\n'
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
