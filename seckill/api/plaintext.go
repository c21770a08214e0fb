package api

// PlainText says whether encoding/json writes s unchanged between its
// quotes: printable ASCII without the quote, the backslash and the three
// characters it escapes for HTML (<, >, &). The hand-written encoders of
// the hot paths (the gateway's buy answers, kafkaq's message) write such a
// string as it is and leave any other to encoding/json.
func PlainText(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}
