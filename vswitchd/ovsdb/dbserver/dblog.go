package dbserver

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/internal/statedir"
)

// The database file is Open vSwitch's standalone format (ovsdb/log.c), so
// that ovsdb-tool reads it and a user can move between this server and
// ovsdb-server: a sequence of records, each a header line
//
//	OVSDB JSON <length> <sha1 of the data, hex>\n
//
// and <length> bytes of data (a JSON value and a newline). The first
// record is the schema, each next one a committed transaction: per table,
// per row UUID, the row's new columns or null for a deleted row.
const recordMagic = "OVSDB JSON"

// logFile is the open database file, appended to at every commit.
type logFile struct {
	path string
	f    *os.File
	size int64
	// records counts the transaction records since the last snapshot,
	// and snapshotSize is the file's size just after it: together they
	// say when to compact.
	records      int
	snapshotSize int64
	// reserved is how far the file's blocks are allocated ahead of its
	// end (reserve).
	reserved int64
}

// Space is reserved ahead of the file's end (fallocate, the size left
// as it is), so that commits go on while the disk is full: a full disk
// then fails a change as a whole or not at all, rather than one client's
// commit passing and the daemon's report of it (cur_cfg) failing, which
// would leave vsctl waiting for a change it was told failed.
const (
	reserveAhead = 1 << 20
	reserveLow   = 256 << 10
)

// reserve allocates the file's blocks up to reserveAhead past its end
// when fewer than reserveLow are left; without space it does nothing.
func (l *logFile) reserve() {
	if l.reserved-l.size >= reserveLow {
		return
	}
	if err := unix.Fallocate(int(l.f.Fd()), unix.FALLOC_FL_KEEP_SIZE, l.size, reserveAhead); err == nil {
		l.reserved = l.size + reserveAhead
	}
}

// composeRecord frames one JSON value as a record.
func composeRecord(v []byte) []byte {
	data := make([]byte, 0, len(v)+1)
	data = append(data, v...)
	data = append(data, '\n')
	sum := sha1.Sum(data)
	out := fmt.Appendf(nil, "%s %d %s\n", recordMagic, len(data), hex.EncodeToString(sum[:]))
	return append(out, data...)
}

// LogDamage is a database file whose records stop being readable before
// its end with more after the damage than a torn last write leaves: the
// server does not start on it rather than lose what follows.
type LogDamage struct {
	Path   string
	Offset int64
	Reason string
}

func (e *LogDamage) Error() string {
	return fmt.Sprintf("database %s is damaged at byte %d: %s (ovsdb-tool show-log reads what precedes it; move the file aside to start empty)", e.Path, e.Offset, e.Reason)
}

// parseLog splits data into records. A last record cut short (a write the
// crash interrupted, never acknowledged) ends the good part; damage
// anywhere else is an error.
func parseLog(data []byte) (records []json.RawMessage, good int64, damage string) {
	off := 0
	for off < len(data) {
		nl := bytes.IndexByte(data[off:], '\n')
		if nl < 0 {
			return records, int64(off), "torn"
		}
		header := string(data[off : off+nl])
		length, sum, ok := parseHeader(header)
		if !ok {
			return records, int64(off), fmt.Sprintf("bad record header %q", truncate(header, 60))
		}
		start := off + nl + 1
		if length > len(data)-start {
			return records, int64(off), "torn"
		}
		body := data[start : start+length]
		if got := sha1.Sum(body); !bytes.Equal(got[:], sum) {
			return records, int64(off), "record checksum mismatch"
		}
		if !json.Valid(body) {
			return records, int64(off), "record is not JSON"
		}
		records = append(records, json.RawMessage(bytes.TrimSpace(body)))
		off = start + length
	}
	return records, int64(off), ""
}

func parseHeader(h string) (length int, sum []byte, ok bool) {
	rest, found := strings.CutPrefix(h, recordMagic+" ")
	if !found {
		return 0, nil, false
	}
	l, s, found := strings.Cut(rest, " ")
	if !found {
		return 0, nil, false
	}
	n, err := strconv.Atoi(l)
	if err != nil || n < 0 {
		return 0, nil, false
	}
	sum, err = hex.DecodeString(s)
	if err != nil || len(sum) != sha1.Size {
		return 0, nil, false
	}
	return n, sum, true
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// readLog reads the records of path; a torn last record is cut off the
// file (it was never acknowledged), and torn says so.
func readLog(path string) (records []json.RawMessage, torn bool, err error) {
	data, err := statedir.ReadFile(path)
	if err != nil {
		return nil, false, err
	}
	records, good, damage := parseLog(data)
	switch damage {
	case "":
		return records, false, nil
	case "torn":
		if err := os.Truncate(path, good); err != nil {
			return nil, false, fmt.Errorf("database %s: cutting the torn last record: %w", path, err)
		}
		return records, true, nil
	}
	return nil, false, &LogDamage{Path: path, Offset: good, Reason: damage}
}

// openAppend opens path for the commits that follow.
func openAppend(path string) (*logFile, error) {
	f, err := statedir.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	l := &logFile{path: path, f: f, size: fi.Size(), snapshotSize: fi.Size()}
	l.reserve()
	return l, nil
}

// append writes one record, not waiting for it to reach the disk: the
// server commits and sends the change to the monitors at once and
// replies to the transaction after Database.Sync, so the fsync overlaps
// with what the monitors (the daemon) do with the change. A failed write
// is cut off again, so the file never holds half a record the next start
// would have to guess about.
func (l *logFile) append(v []byte) error {
	rec := composeRecord(v)
	if _, err := l.f.Write(rec); err != nil {
		l.f.Truncate(l.size)
		l.reserved = 0 // the truncation freed it
		return err
	}
	l.size += int64(len(rec))
	l.records++
	l.reserve()
	return nil
}

// needsCompaction: Open vSwitch compacts after 100 records once the
// file has grown to four times its last snapshot; so does this.
func (l *logFile) needsCompaction() bool {
	return l.records >= 100 && l.size >= 4*l.snapshotSize
}

func (l *logFile) Close() error { return l.f.Close() }

// writeSnapshot replaces path with the schema and one record holding
// every row (none if rows is nil), atomically: written beside it, synced, renamed over it, the
// directory synced. Until the rename the old file is the database.
func writeSnapshot(path string, schema, rows []byte) error {
	buf := composeRecord(schema)
	if rows != nil {
		buf = append(buf, composeRecord(rows)...)
	}
	return statedir.ReplaceFile(path, path+".tmp", buf, 0o600)
}
