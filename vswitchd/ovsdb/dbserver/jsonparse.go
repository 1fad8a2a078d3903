package dbserver

import (
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonParser reads JSON into the values encoding/json's Unmarshal into an
// interface{} makes (map[string]any, []any, string, float64, bool, nil),
// in one pass and without reflection: an ovs-vsctl add-port on a bridge
// of a thousand ports is a transaction of ~350 KB (a wait on every port),
// which encoding/json scanned five times over (the message, its params,
// each operation twice) and decoded through reflection, a fifth of the
// daemon's time per add-port. Anything it does not take (malformed JSON,
// and the cases its callers leave to encoding/json) is an error, after
// which the callers decode with encoding/json, for its errors.
type jsonParser struct {
	b []byte
	i int
}

var errJSON = errors.New("json: not taken by the fast parser")

// maxJSONDepth bounds the nesting taken (encoding/json's limit is
// 10,000; deeper than this goes to it).
const maxJSONDepth = 1000

// parseJSON reads b, one JSON value and nothing else.
func parseJSON(b []byte) (any, error) {
	p := jsonParser{b: b}
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	if p.ws(); p.i != len(p.b) {
		return nil, errJSON
	}
	return v, nil
}

func (p *jsonParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) value(depth int) (any, error) {
	p.ws()
	if p.i >= len(p.b) {
		return nil, errJSON
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		return p.string()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		lit, err := p.number()
		if err != nil {
			return nil, err
		}
		f, err := strconv.ParseFloat(string(lit), 64)
		if err != nil {
			return nil, errJSON
		}
		return f, nil
	}
	return nil, errJSON
}

func (p *jsonParser) literal(s string) error {
	if len(p.b)-p.i < len(s) || string(p.b[p.i:p.i+len(s)]) != s {
		return errJSON
	}
	p.i += len(s)
	return nil
}

// number returns a number's literal, checked against JSON's grammar.
func (p *jsonParser) number() ([]byte, error) {
	start := p.i
	digits := func() int {
		n := 0
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.b[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.b) && p.b[p.i] == '0':
		p.i++
	case digits() == 0:
		return nil, errJSON
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return nil, errJSON
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return nil, errJSON
		}
	}
	return p.b[start:p.i], nil
}

func (p *jsonParser) array(depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, errJSON
	}
	p.i++ // [
	out := []any{}
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return out, nil
	}
	for {
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		p.ws()
		if p.i >= len(p.b) {
			return nil, errJSON
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return out, nil
		default:
			return nil, errJSON
		}
	}
}

func (p *jsonParser) object(depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, errJSON
	}
	out := map[string]any{}
	err := p.members(true, func(k string) error {
		v, err := p.value(depth)
		out[k] = v
		return err
	})
	return out, err
}

// members reads an object's members (p at its '{'), member reading the
// value of each key (given to it if keys is set, else skipped).
func (p *jsonParser) members(keys bool, member func(key string) error) error {
	p.i++ // {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return nil
	}
	for {
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return errJSON
		}
		var k string
		var err error
		if keys {
			k, err = p.string()
		} else {
			err = p.skipString()
		}
		if err != nil {
			return err
		}
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return errJSON
		}
		p.i++
		if err := member(k); err != nil {
			return err
		}
		p.ws()
		if p.i >= len(p.b) {
			return errJSON
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return nil
		default:
			return errJSON
		}
	}
}

// string reads a string (p at its opening quote) as encoding/json does:
// invalid UTF-8 and unpaired surrogates become U+FFFD.
func (p *jsonParser) string() (string, error) {
	p.i++ // "
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		if c == '"' {
			s := string(p.b[start:p.i])
			p.i++
			return s, nil
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
		p.i++
	}
	out := append([]byte(nil), p.b[start:p.i]...)
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return string(out), nil
		case c < 0x20:
			return "", errJSON
		case c == '\\':
			if p.i+1 >= len(p.b) {
				return "", errJSON
			}
			e := p.b[p.i+1]
			p.i += 2
			switch e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r := p.hex4()
				if r < 0 {
					return "", errJSON
				}
				if utf16.IsSurrogate(r) {
					// A pair only when a \u escape of its other half
					// follows; else U+FFFD, the next escape read alone.
					r2 := rune(-1)
					if p.i+1 < len(p.b) && p.b[p.i] == '\\' && p.b[p.i+1] == 'u' {
						save := p.i
						p.i += 2
						r2 = p.hex4()
						p.i = save
					}
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						p.i += 6
						r = d
					} else {
						r = utf8.RuneError
					}
				}
				out = utf8.AppendRune(out, r)
			default:
				return "", errJSON
			}
		case c < utf8.RuneSelf:
			out = append(out, c)
			p.i++
		default:
			r, size := utf8.DecodeRune(p.b[p.i:])
			p.i += size
			out = utf8.AppendRune(out, r) // RuneError for invalid bytes
		}
	}
	return "", errJSON
}

// skipString passes over a string (p at its opening quote), checked as
// string checks it.
func (p *jsonParser) skipString() error {
	p.i++ // "
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return nil
		case c < 0x20:
			return errJSON
		case c == '\\':
			if p.i+1 >= len(p.b) {
				return errJSON
			}
			e := p.b[p.i+1]
			p.i += 2
			switch e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if p.hex4() < 0 {
					return errJSON
				}
			default:
				return errJSON
			}
		default:
			p.i++
		}
	}
	return errJSON
}

// hex4 reads four hex digits, or returns -1.
func (p *jsonParser) hex4() rune {
	if len(p.b)-p.i < 4 {
		return -1
	}
	var r rune
	for _, c := range p.b[p.i : p.i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	p.i += 4
	return r
}

// skip passes over one value, checked as value would check it.
func (p *jsonParser) skip(depth int) error {
	p.ws()
	if p.i >= len(p.b) {
		return errJSON
	}
	switch c := p.b[p.i]; {
	case c == '{':
		if depth+1 > maxJSONDepth {
			return errJSON
		}
		return p.members(false, func(string) error { return p.skip(depth + 1) })
	case c == '[':
		if depth+1 > maxJSONDepth {
			return errJSON
		}
		p.i++
		p.ws()
		if p.i < len(p.b) && p.b[p.i] == ']' {
			p.i++
			return nil
		}
		for {
			if err := p.skip(depth + 1); err != nil {
				return err
			}
			p.ws()
			if p.i >= len(p.b) {
				return errJSON
			}
			switch p.b[p.i] {
			case ',':
				p.i++
			case ']':
				p.i++
				return nil
			default:
				return errJSON
			}
		}
	case c == '"':
		return p.skipString()
	case c == '-' || c >= '0' && c <= '9':
		_, err := p.number()
		return err
	}
	_, err := p.value(depth)
	return err
}

// splitArray returns the elements of the JSON array b, each as it is
// written, as json.Unmarshal into a []json.RawMessage does (a null is
// no elements).
func splitArray(b []byte) ([]json.RawMessage, error) {
	p := jsonParser{b: b}
	p.ws()
	if err := p.literal("null"); err == nil {
		if p.ws(); p.i == len(p.b) {
			return nil, nil
		}
		return nil, errJSON
	}
	if p.i >= len(p.b) || p.b[p.i] != '[' {
		return nil, errJSON
	}
	p.i++
	out := []json.RawMessage{}
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
	} else {
		for {
			p.ws()
			start := p.i
			if err := p.skip(1); err != nil {
				return nil, err
			}
			out = append(out, json.RawMessage(p.b[start:p.i:p.i]))
			p.ws()
			if p.i >= len(p.b) {
				return nil, errJSON
			}
			if p.b[p.i] == ']' {
				p.i++
				break
			}
			if p.b[p.i] != ',' {
				return nil, errJSON
			}
			p.i++
		}
	}
	if p.ws(); p.i != len(p.b) {
		return nil, errJSON
	}
	return out, nil
}

// fastWireOperation reads an operation as json.Unmarshal into a
// wireOperation would, or says it leaves it to json.Unmarshal: a member
// not spelt as the field's tag (encoding/json matches any case), given
// twice (it merges a row given twice), or of another type than its
// field's.
func fastWireOperation(b []byte) (w wireOperation, ok bool) {
	p := jsonParser{b: b}
	p.ws()
	if p.i >= len(p.b) || p.b[p.i] != '{' {
		return w, false
	}
	seen := map[string]bool{}
	err := p.members(true, func(k string) error {
		if seen[k] {
			return errJSON
		}
		seen[k] = true
		if k == "timeout" {
			p.ws()
			if p.literal("null") == nil {
				w.Timeout = nil
				return nil
			}
			if p.i >= len(p.b) || p.b[p.i] != '-' && (p.b[p.i] < '0' || p.b[p.i] > '9') {
				return errJSON
			}
			lit, err := p.number()
			if err != nil {
				return err
			}
			n, err := strconv.ParseInt(string(lit), 10, strconv.IntSize)
			if err != nil {
				return errJSON
			}
			w.Timeout = new(int(n))
			return nil
		}
		v, err := p.value(1)
		if err != nil {
			return err
		}
		return w.set(k, v)
	})
	if err != nil {
		return wireOperation{}, false
	}
	if p.ws(); p.i != len(p.b) {
		return wireOperation{}, false
	}
	return w, true
}

// set sets w's member k to v, as encoding/json would (a null leaves a
// string as it is and empties the rest), or fails.
func (w *wireOperation) set(k string, v any) error {
	str := func(dst *string) error {
		switch x := v.(type) {
		case nil:
		case string:
			*dst = x
		default:
			return errJSON
		}
		return nil
	}
	optStr := func(dst **string) error {
		switch x := v.(type) {
		case nil:
			*dst = nil
		case string:
			*dst = &x
		default:
			return errJSON
		}
		return nil
	}
	lists := func(dst *[][]any) error {
		if v == nil {
			*dst = nil
			return nil
		}
		l, ok := v.([]any)
		if !ok {
			return errJSON
		}
		out := make([][]any, len(l))
		for i, e := range l {
			switch x := e.(type) {
			case nil:
			case []any:
				out[i] = x
			default:
				return errJSON
			}
		}
		*dst = out
		return nil
	}
	switch k {
	case "op":
		return str(&w.Op)
	case "table":
		return str(&w.Table)
	case "until":
		return str(&w.Until)
	case "uuid":
		return str(&w.UUID)
	case "uuid-name":
		return str(&w.UUIDName)
	case "comment":
		return optStr(&w.Comment)
	case "lock":
		return optStr(&w.Lock)
	case "durable":
		switch x := v.(type) {
		case nil:
			w.Durable = nil
		case bool:
			w.Durable = &x
		default:
			return errJSON
		}
	case "row":
		switch x := v.(type) {
		case nil:
			w.Row = nil
		case map[string]any:
			w.Row = x
		default:
			return errJSON
		}
	case "rows":
		if v == nil {
			w.Rows = nil
			return nil
		}
		l, ok := v.([]any)
		if !ok {
			return errJSON
		}
		w.Rows = make([]map[string]any, len(l))
		for i, e := range l {
			switch x := e.(type) {
			case nil:
			case map[string]any:
				w.Rows[i] = x
			default:
				return errJSON
			}
		}
	case "columns":
		if v == nil {
			w.Columns = nil
			return nil
		}
		l, ok := v.([]any)
		if !ok {
			return errJSON
		}
		w.Columns = make([]string, len(l))
		for i, e := range l {
			s, ok := e.(string)
			if !ok {
				return errJSON
			}
			w.Columns[i] = s
		}
	case "mutations":
		return lists(&w.Mutations)
	case "where":
		return lists(&w.Where)
	default:
		return errJSON
	}
	return nil
}
