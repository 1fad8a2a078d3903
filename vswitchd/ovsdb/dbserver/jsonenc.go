package dbserver

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/ovn-kubernetes/libovsdb/ovsdb"
)

// appendJSON appends v as JSON, as encoding/json with libovsdb's
// MarshalJSON methods would write it, for the values replies and updates
// are made of: maps and slices of them, and the OVSDB notation of rows
// (strings, numbers, booleans, ovsdb.UUID, ovsdb.OvsSet, ovsdb.OvsMap).
// encoding/json reaches those through reflection and MarshalJSON methods
// that marshal a copy and have it checked and compacted again: a monitor's
// first reply of a thousand ports' rows, sent to every ovs-vsctl, cost
// more than the transaction it came for. Other types go to encoding/json.
func appendJSON(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendString(b, x), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case json.RawMessage:
		if x == nil {
			return append(b, "null"...), nil
		}
		return append(b, x...), nil
	case ovsdb.UUID:
		kind := "uuid"
		if !isUUID(x.GoUUID) {
			kind = "named-uuid"
		}
		b = append(b, `["`...)
		b = append(b, kind...)
		b = append(b, `",`...)
		return append(appendString(b, x.GoUUID), ']'), nil
	case ovsdb.OvsSet:
		switch len(x.GoSet) {
		case 0:
			return append(b, `["set",[]]`...), nil
		case 1:
			return appendJSON(b, x.GoSet[0])
		}
		b = append(b, `["set",`...)
		b, err := appendJSON(b, x.GoSet)
		return append(b, ']'), err
	case ovsdb.OvsMap:
		b = append(b, `["map",[`...)
		first := true
		for k, val := range x.GoMap {
			if !first {
				b = append(b, ',')
			}
			first = false
			var err error
			b = append(b, '[')
			if b, err = appendJSON(b, k); err != nil {
				return b, err
			}
			b = append(b, ',')
			if b, err = appendJSON(b, val); err != nil {
				return b, err
			}
			b = append(b, ']')
		}
		return append(b, "]]"...), nil
	case ovsdb.Row:
		return appendObject(b, x)
	case map[string]any:
		return appendObject(b, x)
	case map[string]map[string]any:
		if x == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '{')
		first := true
		for k, val := range x {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = append(appendString(b, k), ':')
			var err error
			if b, err = appendObject(b, val); err != nil {
				return b, err
			}
		}
		return append(b, '}'), nil
	case []any:
		if x == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendJSON(b, e); err != nil {
				return b, err
			}
		}
		return append(b, ']'), nil
	}
	j, err := json.Marshal(v)
	return append(b, j...), err
}

func appendObject[M ~map[string]any](b []byte, m M) ([]byte, error) {
	if m == nil {
		return append(b, "null"...), nil
	}
	b = append(b, '{')
	first := true
	for k, val := range m {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(appendString(b, k), ':')
		var err error
		if b, err = appendJSON(b, val); err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}

// appendString appends s as a JSON string. Control characters, quotes and
// backslashes are escaped, as are <, > and & (as encoding/json does);
// invalid UTF-8 becomes U+FFFD, as with encoding/json.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		// U+2028 and U+2029, as encoding/json escapes them.
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// isUUID is ovsdb.ValidateUUID(s) == nil (36 characters: lower-case hex
// digits, dashes after the 8th, 12th, 16th and 20th) without its regular
// expression: a Bridge's 1,000 port references were a regexp match each,
// in every record and every update of the row, a fifth of an add-port's
// cost in the server (BenchmarkAddPort).
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}
