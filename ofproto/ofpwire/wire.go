package ofpwire

import (
	"bytes"
	"encoding/binary"
	"io"
	"sync"
)

var be = binary.BigEndian

// roundUp8 is the OpenFlow padding rule: variable-length structures are
// padded so that the next one starts on a 64-bit boundary.
func roundUp8(n int) int { return (n + 7) &^ 7 }

func appendZeros(b []byte, n int) []byte {
	for ; n > 0; n-- {
		b = append(b, 0)
	}
	return b
}

// putLen16 back-patches a 16-bit length field once the structure it
// describes has been appended.
func putLen16(b []byte, at int, n int) { be.PutUint16(b[at:], uint16(n)) }

// cloneBytes copies wire bytes out of the (reused) read buffer. Empty input
// gives nil so that decoded values compare equal however they were built.
func cloneBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

// netrackMu serialises netrack/openflow's ReadFrom and WriteTo: they decode
// padding into, and encode it from, package-level variables shared by every
// structure (defaultPad4 and friends), which two connections decoding at
// once would race on. These are control-plane messages; one lock is cheap.
var netrackMu sync.Mutex

// readFixed decodes one of netrack/openflow's fixed-layout structures with
// its own ReadFrom, after checking that exactly size bytes are present (its
// ReadFrom trusts the reader and would otherwise read short or long).
func readFixed(b []byte, size int, v io.ReaderFrom, onErr *OFPError) error {
	if len(b) != size {
		return onErr
	}
	netrackMu.Lock()
	defer netrackMu.Unlock()
	if _, err := v.ReadFrom(bytes.NewReader(b)); err != nil {
		return onErr
	}
	return nil
}

// appendFixed encodes a fixed-layout netrack/openflow structure with its own
// WriteTo (which cannot fail for these types: they hold only integers).
func appendFixed(b []byte, v io.WriterTo) []byte {
	var buf bytes.Buffer
	netrackMu.Lock()
	v.WriteTo(&buf)
	netrackMu.Unlock()
	return append(b, buf.Bytes()...)
}

// cString decodes a fixed-size NUL-padded string field. At most size-1 bytes
// are kept so that what we decode always re-encodes with its terminator.
func cString(b []byte) string {
	n := bytes.IndexByte(b, 0)
	if n < 0 || n > len(b)-1 {
		n = len(b) - 1
	}
	return string(b[:n])
}

// appendCString encodes s into a size-byte NUL-terminated field, truncating.
func appendCString(b []byte, s string, size int) []byte {
	if len(s) > size-1 {
		s = s[:size-1]
	}
	if i := indexNUL(s); i >= 0 {
		s = s[:i]
	}
	b = append(b, s...)
	return appendZeros(b, size-len(s))
}

func indexNUL(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return i
		}
	}
	return -1
}
