// Package flowjournal keeps a bridge's OpenFlow tables across crashes: a
// snapshot of the tables (a file per bridge, BRIDGE.tables) and a
// write-ahead journal of every change since (BRIDGE.journal), replayed on
// top of it at start. Its files are the daemon's; what the tables are and
// when to snapshot them is the daemon's too.
package flowjournal

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/vswitch-go/vswitch/internal/statedir"
	"github.com/vswitch-go/vswitch/ofproto/ofptext"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// Suffix follows a bridge's name to make the file its OpenFlow
// changes are journaled in between two snapshots of its tables.
const Suffix = ".journal"

// A flow table journal makes every acknowledged OpenFlow change durable at
// the cost of one appended record instead of a rewrite of the whole table:
// ovs-ofctl sends a barrier after every flow-mod, so saving the table at
// each would make loading N flows cost O(N²). The snapshot plus the
// journal replayed in order give the tables back; the daemon takes a new
// snapshot and empties the journal when the switch is quiet or the
// journal has grown as large as the tables.
//
// The record is written before the change is applied (the daemon's
// bridge.logTableMod),
// so a change the journal cannot take is refused instead of living in
// memory only; a change the tables then refuse is cut back off the file.
//
// On disk (format 3): the line journalHeader, then one record per change,
// "LLLLLLLL CCCCCCCC PAYLOAD\n": the payload's length and its CRC32C
// (Castagnoli) as 8 hex digits each, and the payload: a change in
// ovs-ofctl syntax (FormatMod), or a bundle commit as its OpenFlow
// messages in base64 (EncodeBundleRecord). The length says where the
// record must end, so a record cut short, overwritten or padded is told
// from a good one; a payload never holds a newline, so a torn last record
// is told from damage. Format 2 (the same records, a bundle as tab-joined
// ovs-ofctl changes) is read and rewritten as format 3.
type Journal struct {
	path    string
	f       *os.File
	size    int64 // bytes of whole records (and the header) in the file
	records int
	// changes counts the table changes in the records appended since the
	// last reset (a bundle's each), for the snapshot policy: a journal is
	// as costly to replay as the changes it holds, not its records.
	changes int
	// unsynced is set when records were appended since the last fsync.
	unsynced bool
	// broken is set when an append failed and its partial record could not
	// be cut back: appending more would bury damage in the middle of the
	// file, so appends are refused until reset rewrites it.
	broken error
}

// journalHeader opens every format 3 journal, journalHeaderV2 a format 2
// one (which an older vswitchd wrote, and whose reader drops a record it
// does not know: the header change makes it refuse a format 3 journal
// instead of losing its bundles). A file with neither is read as format 1
// (one bare change per line, no checksums). Both older formats are
// rewritten as format 3.
const (
	journalHeader   = "vswitchd-flow-journal 3\n"
	journalHeaderV2 = "vswitchd-flow-journal 2\n"
)

// maxJournalRecord bounds a record's payload, so that a damaged length
// cannot claim a whole large file: FormatMod renders a change of at most
// 64 KiB of OpenFlow in far less, and a bundle's record is 4/3 of its
// messages (a million flow-mods is ~130 MB). A bundle larger than this is
// saved by a snapshot instead.
const maxJournalRecord = 256 << 20

// maxChangeRecord bounds the payload of one change's record.
const maxChangeRecord = 1 << 20

const recordHeaderLen = 18 // "LLLLLLLL CCCCCCCC "

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeRecord renders one record of the format above.
func encodeRecord(dst []byte, payload string) []byte {
	dst = fmt.Appendf(dst, "%08x %08x ", len(payload), crc32.Checksum([]byte(payload), castagnoli))
	dst = append(dst, payload...)
	return append(dst, '\n')
}

// Damage describes a journal whose damage is not a torn last
// record: start-up refuses it, since the records after the damage were
// acknowledged and dropping them silently would lose flows.
type Damage struct {
	Path string
	// Record is the damaged record's number (1 for the first) and Offset
	// its byte offset in the file; Good counts the whole records before it.
	Record int
	Offset int64
	Size   int64
	Reason string
}

func (e *Damage) Error() string {
	return fmt.Sprintf("flow journal %s is damaged at record %d (byte offset %d of %d): %s; "+
		"the file is left untouched. Start vswitchd with --recover to keep the %d records before it "+
		"and move the file aside", e.Path, e.Record, e.Offset, e.Size, e.Reason, e.Record-1)
}

// journalContents is what parseJournal found in a journal file.
type journalContents struct {
	records []string
	// good is the length of the prefix that holds whole, valid records.
	good   int64
	legacy bool
	// v2 is set for a format 2 journal.
	v2 bool
	// damage, if set, is why the bytes from good on are not a record;
	// torn tells a last record cut short (no newline after the damage).
	damage string
	torn   bool
}

// parseJournal reads a journal file's contents, format 2 or, without the
// header, format 1. It stops at the first damaged record.
func parseJournal(data []byte) journalContents {
	if len(data) == 0 {
		return journalContents{}
	}
	header := journalHeader
	v2 := bytes.HasPrefix(data, []byte(journalHeaderV2))
	if v2 {
		header = journalHeaderV2
	} else if !bytes.HasPrefix(data, []byte(journalHeader)) {
		if len(data) < len(journalHeader) &&
			(bytes.HasPrefix([]byte(journalHeader), data) || bytes.HasPrefix([]byte(journalHeaderV2), data)) {
			// The header itself was being written.
			return journalContents{damage: "header cut short", torn: true}
		}
		return parseLegacyJournal(data)
	}
	jc := journalContents{good: int64(len(header)), v2: v2}
	off := len(header)
	for off < len(data) {
		payload, next, reason := parseRecord(data, off)
		if reason != "" {
			jc.damage = reason
			jc.torn = bytes.IndexByte(data[off:], '\n') < 0
			return jc
		}
		jc.records = append(jc.records, payload)
		off = next
		jc.good = int64(off)
	}
	return jc
}

// parseRecord reads the record at off, returning its payload and where
// the next one starts, or why it is not a record.
func parseRecord(data []byte, off int) (payload string, next int, damage string) {
	rest := data[off:]
	if len(rest) < recordHeaderLen {
		return "", 0, "record header cut short"
	}
	n, ok1 := hex8(rest[0:8])
	sum, ok2 := hex8(rest[9:17])
	if !ok1 || !ok2 || rest[8] != ' ' || rest[17] != ' ' {
		return "", 0, fmt.Sprintf("no record header (found %q)", printable(rest[:recordHeaderLen]))
	}
	if n > maxJournalRecord {
		return "", 0, fmt.Sprintf("record length %d is over the limit of %d", n, maxJournalRecord)
	}
	end := recordHeaderLen + int(n) + 1
	if end > len(rest) {
		return "", 0, fmt.Sprintf("record of %d bytes runs past the end of the file", n)
	}
	p := rest[recordHeaderLen : end-1]
	if rest[end-1] != '\n' {
		return "", 0, "record not followed by a newline"
	}
	if got := crc32.Checksum(p, castagnoli); got != uint32(sum) {
		return "", 0, fmt.Sprintf("checksum %08x does not match the record's %08x", got, sum)
	}
	if bytes.IndexByte(p, '\n') >= 0 {
		return "", 0, "record holds a newline"
	}
	return string(p), off + end, ""
}

// hex8 reads 8 lower-case hex digits, the only spelling encodeRecord
// writes: anything else in a header is damage.
func hex8(b []byte) (uint64, bool) {
	var v uint64
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			v = v<<4 | uint64(c-'0')
		case 'a' <= c && c <= 'f':
			v = v<<4 | uint64(c-'a'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

// parseLegacyJournal reads format 1: one change per line, a last line
// without its newline torn. A line that is not a change is damage.
func parseLegacyJournal(data []byte) journalContents {
	jc := journalContents{legacy: true}
	off := 0
	for off < len(data) {
		i := bytes.IndexByte(data[off:], '\n')
		if i < 0 {
			jc.damage, jc.torn = "last line cut short", true
			return jc
		}
		line := data[off : off+i]
		if len(line) > 0 {
			kind, _, _ := bytes.Cut(line, []byte(" "))
			switch string(kind) {
			case "flow", "group", "meter":
			default:
				jc.damage = fmt.Sprintf("line %q is not a change", printable(line))
				return jc
			}
			if len(line) > maxJournalRecord || bytes.IndexByte(line, 0) >= 0 {
				jc.damage = "line is not text or too long"
				return jc
			}
			jc.records = append(jc.records, string(line))
		}
		off += i + 1
		jc.good = int64(off)
	}
	return jc
}

// printable shortens and quotes-safes damaged bytes for a message.
func printable(b []byte) string {
	if len(b) > 32 {
		b = b[:32]
	}
	return strings.ToValidUTF8(string(b), "?")
}

// openFile opens a journal file without following a symbolic link
// (the state directory is the daemon's own; a link there is not) and with
// mode 0600 whatever the umask: it holds the switch's whole policy.
func openFile(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Open opens (creating) the journal at path and returns the
// records it holds. A torn last record was never acknowledged: it is cut
// off with a warning. Other damage is a *Damage and leaves the file
// untouched, unless recoverDamaged is set: then the file is moved aside
// (PATH.corrupt-TIMESTAMP), and a new journal keeps the records before the
// damage. A format 1 journal is rewritten as format 2.
func Open(path string, recoverDamaged bool, log *slog.Logger) (*Journal, []string, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f, err := openFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND)
	if err != nil {
		return nil, nil, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	jc := parseJournal(data)
	switch {
	case jc.damage != "" && !jc.torn:
		dmg := &Damage{Path: path, Record: len(jc.records) + 1, Offset: jc.good, Size: int64(len(data)), Reason: jc.damage}
		if !recoverDamaged {
			f.Close()
			return nil, nil, dmg
		}
		f.Close()
		aside := path + ".corrupt-" + time.Now().UTC().Format("20060102T150405Z")
		if err := os.Rename(path, aside); err != nil {
			return nil, nil, err
		}
		log.Warn("flow journal damaged: kept the records before the damage, moved the file aside",
			"journal", path, "moved-to", aside, "kept", len(jc.records), "bad-record", dmg.Record,
			"offset", dmg.Offset, "dropped-bytes", dmg.Size-dmg.Offset, "reason", jc.damage)
		j, err := rewrite(path, jc.records)
		return j, jc.records, err
	case jc.torn:
		log.Warn("flow journal: dropped a torn last record (never acknowledged)", "journal", path,
			"record", len(jc.records)+1, "offset", jc.good, "dropped-bytes", int64(len(data))-jc.good, "reason", jc.damage)
		if jc.legacy || jc.v2 || jc.good == 0 {
			f.Close()
			j, err := rewrite(path, jc.records)
			return j, jc.records, err
		}
		if err := f.Truncate(jc.good); err != nil {
			f.Close()
			return nil, nil, err
		}
	case jc.legacy || jc.v2 || len(data) == 0:
		f.Close()
		if jc.legacy || jc.v2 {
			log.Info("flow journal: older format rewritten as format 3", "journal", path,
				"format", map[bool]int{true: 1, false: 2}[jc.legacy], "records", len(jc.records))
		}
		j, err := rewrite(path, jc.records)
		return j, jc.records, err
	}
	return &Journal{path: path, f: f, size: jc.good, records: len(jc.records), changes: len(jc.records)}, jc.records, nil
}

// rewrite replaces the journal at path with one holding records,
// through a synced temporary file renamed over it, and opens it.
func rewrite(path string, records []string) (*Journal, error) {
	buf := []byte(journalHeader)
	for _, r := range records {
		buf = encodeRecord(buf, r)
	}
	if err := statedir.ReplaceFile(path, path+".tmp", buf, 0o600); err != nil {
		return nil, err
	}
	f, err := openFile(path, os.O_RDWR|os.O_APPEND)
	if err != nil {
		return nil, err
	}
	return &Journal{path: path, f: f, size: int64(len(buf)), records: len(records), changes: len(records)}, nil
}

// ChangeRecord encodes one change's payload as a record, or says why it
// cannot be journaled.
func ChangeRecord(payload string) ([]byte, error) {
	if strings.IndexByte(payload, '\n') >= 0 || len(payload) > maxChangeRecord {
		return nil, fmt.Errorf("record %.40q cannot be journaled", payload)
	}
	return encodeRecord(make([]byte, 0, recordHeaderLen+len(payload)+1), payload), nil
}

// Append writes one change's record (ChangeRecord).
func (j *Journal) Append(payload string) error {
	rec, err := ChangeRecord(payload)
	if err != nil {
		return err
	}
	return j.AppendRecord(rec, 1)
}

// AppendRecord writes rec, a whole encoded record holding n changes, in
// one write call. On failure (a full disk, an I/O error) whatever part of
// it reached the file is cut back, so the file still ends with a whole
// record; if even that fails the journal is broken until reset.
func (j *Journal) AppendRecord(rec []byte, n int) error {
	if j.broken != nil {
		return fmt.Errorf("journal unusable since an earlier failure: %w", j.broken)
	}
	if _, err := j.f.Write(rec); err != nil {
		if terr := j.f.Truncate(j.size); terr != nil {
			j.broken = err
		}
		return err
	}
	j.size += int64(len(rec))
	j.records++
	j.changes += n
	j.unsynced = true
	return nil
}

// UndoLast cuts off the record just appended, rec of n changes (its
// change was refused after all).
func (j *Journal) UndoLast(rec []byte, n int) error {
	if err := j.f.Truncate(j.size - int64(len(rec))); err != nil {
		j.broken = err
		return err
	}
	j.size -= int64(len(rec))
	j.records--
	j.changes -= n
	return nil
}

// Records counts the records appended since the last Reset (and those
// found at Open).
func (j *Journal) Records() int { return j.records }

// Changes counts the table changes in those records (a bundle's each): a
// journal is as costly to replay as the changes it holds.
func (j *Journal) Changes() int { return j.changes }

// Broken is why appends are refused until Reset, or nil.
func (j *Journal) Broken() error { return j.broken }

// StartSync hands over the file to fsync outside the caller's lock when
// records were appended since the last sync (nil when none were), counting
// them synced; if that fsync fails the caller says so with SyncFailed.
func (j *Journal) StartSync() *os.File {
	if !j.unsynced {
		return nil
	}
	j.unsynced = false
	return j.f
}

// SyncFailed marks the records unsynced again after a failed fsync of the
// file StartSync returned.
func (j *Journal) SyncFailed() { j.unsynced = true }

// SwapFile makes the journal append to f from now on, forgetting an
// earlier failure, and returns the file it appended to: for tests that
// inject faults a real file cannot be made to have (a file that takes
// writes but not fsync).
func (j *Journal) SwapFile(f *os.File) *os.File {
	old := j.f
	j.f, j.broken = f, nil
	return old
}

// Sync makes the appended records durable.
func (j *Journal) Sync() error {
	if !j.unsynced {
		return nil
	}
	if err := j.f.Sync(); err != nil {
		return err
	}
	j.unsynced = false
	return nil
}

// Reset empties the journal once a snapshot holds everything in it.
func (j *Journal) Reset() error {
	if err := j.f.Truncate(0); err != nil {
		return err
	}
	j.records, j.changes, j.size, j.unsynced = 0, 0, 0, false
	if _, err := io.WriteString(j.f, journalHeader); err != nil {
		j.broken = err
		return err
	}
	j.size = int64(len(journalHeader))
	j.broken = nil
	return j.f.Sync()
}

func (j *Journal) Close() error { return j.f.Close() }

// FormatMod renders a FLOW_MOD, GROUP_MOD or METER_MOD as a journal line:
// "flow|group|meter COMMAND SPEC", SPEC in ovs-ofctl syntax.
func FormatMod(msg ofpwire.Message) (string, error) {
	switch m := msg.(type) {
	case *ofpwire.FlowMod:
		name, ok := flowCommands[m.Command]
		if !ok {
			return "", fmt.Errorf("flow-mod command %d", m.Command)
		}
		return "flow " + name + " " + ofptext.FormatFlowMod(m), nil
	case *ofpwire.GroupMod:
		name, ok := groupCommands[m.Command]
		if !ok {
			return "", fmt.Errorf("group-mod command %d", m.Command)
		}
		return "group " + name + " " + ofptext.FormatGroupMod(m), nil
	case *ofpwire.MeterMod:
		name, ok := meterCommands[m.Command]
		if !ok {
			return "", fmt.Errorf("meter-mod command %d", m.Command)
		}
		return "meter " + name + " " + ofptext.FormatMeterMod(m), nil
	}
	return "", fmt.Errorf("%T is not a table change", msg)
}

// bundleRecord starts format 2's bundle record, whose changes follow in
// ovs-ofctl syntax separated by tabs. Format 3 reads it and writes
// wireBundleRecord.
const bundleRecord = "bundle "

// wireBundleRecord starts the record of a bundle commit: its changes in
// order, as items separated by tabs, each either OpenFlow messages' wire
// bytes (in the 1.3-based internal encoding the switch decodes every
// version to, or as the peer sent them, in its version: EncodeBundleWire),
// back to back, in standard base64, or, for a group or meter
// change with a setting that encoding does not carry (a group's
// selection_method has none in this switch's codec), the change in
// ovs-ofctl syntax (FormatMod), which holds a space where base64 has none.
// A bundle is the bulk path (a controller's whole table in one commit):
// encoding it costs a small fraction of rendering each change as text,
// and reading it back a fraction of parsing the text.
const wireBundleRecord = "ofp-bundle "

// EncodeBundleRecord appends the record of a bundle commit to dst.
// Flow-mods are trusted to the codec, which re-encodes whatever it
// decoded (ofpwire's FuzzDecode); the rarer group and meter changes are
// checked and written as text when their encoding would lose something.
func EncodeBundleRecord(dst []byte, msgs []ofpwire.Message) ([]byte, error) {
	// items are the record's items in order: wire[start:end] in base64,
	// or text when it is set.
	type item struct {
		start, end int
		text       string
	}
	var items []item
	wire := make([]byte, 0, 160*len(msgs))
	runStart := 0
	for _, m := range msgs {
		start := len(wire)
		var err error
		if wire, err = ofpwire.AppendEncode(wire, 0, m); err != nil {
			return nil, err
		}
		switch m.(type) {
		case *ofpwire.FlowMod:
			continue
		case *ofpwire.GroupMod, *ofpwire.MeterMod:
		default:
			return nil, fmt.Errorf("%T is not a table change", m)
		}
		if back, err := parseWireBundle(wire[start:]); err == nil && len(back) == 1 && reflect.DeepEqual(back[0], m) {
			continue
		}
		wire = wire[:start]
		l, err := FormatMod(m)
		if err != nil {
			return nil, err
		}
		if strings.ContainsAny(l, "\t\n") {
			return nil, fmt.Errorf("change %.40q cannot be journaled in a bundle", l)
		}
		if start > runStart {
			items = append(items, item{start: runStart, end: start})
		}
		items = append(items, item{text: l})
		runStart = start
	}
	if len(wire) > runStart || len(items) == 0 {
		items = append(items, item{start: runStart, end: len(wire)})
	}
	recItems := make([]bundleItem, len(items))
	for i, it := range items {
		recItems[i] = bundleItem{wire: wire[it.start:it.end], text: it.text}
	}
	return appendBundleRecord(dst, recItems, len(msgs))
}

// EncodeBundleWire appends the record of a bundle commit whose messages
// are given as the peer sent them (ofconn.WireBundleCommitter's chunks,
// whole messages each): the bytes are recorded as they are, one item a
// chunk, without encoding the messages again. The messages decode in
// the version they were sent in; ParseChange reads any. n is the
// number of changes, for the error of a record too large.
func EncodeBundleWire(dst []byte, wire [][]byte, n int) ([]byte, error) {
	items := make([]bundleItem, 0, max(len(wire), 1))
	for _, w := range wire {
		if len(w) > 0 {
			items = append(items, bundleItem{wire: w})
		}
	}
	if len(items) == 0 {
		items = append(items, bundleItem{})
	}
	return appendBundleRecord(dst, items, n)
}

// bundleItem is one item of a bundle record: wire bytes in base64, or
// text when it is set.
type bundleItem struct {
	wire []byte
	text string
}

// appendBundleRecord appends the record of a bundle of n changes made of
// items to dst.
func appendBundleRecord(dst []byte, items []bundleItem, nchanges int) ([]byte, error) {
	n := len(wireBundleRecord) + len(items) - 1
	for _, it := range items {
		if it.text != "" {
			n += len(it.text)
		} else {
			n += base64.StdEncoding.EncodedLen(len(it.wire))
		}
	}
	if n > maxJournalRecord {
		return nil, fmt.Errorf("bundle of %d changes exceeds a journal record", nchanges)
	}
	start := len(dst)
	dst = slices.Grow(dst, recordHeaderLen+n+1)
	dst = append(dst, make([]byte, recordHeaderLen)...)
	dst = append(dst, wireBundleRecord...)
	for i, it := range items {
		if i > 0 {
			dst = append(dst, '\t')
		}
		if it.text != "" {
			dst = append(dst, it.text...)
		} else {
			dst = base64.StdEncoding.AppendEncode(dst, it.wire)
		}
	}
	p := dst[start+recordHeaderLen:]
	copy(dst[start:], fmt.Appendf(nil, "%08x %08x ", len(p), crc32.Checksum(p, castagnoli)))
	return append(dst, '\n'), nil
}

// parseWireBundle reads the messages of a bundle record, once out of
// base64, back.
func parseWireBundle(wire []byte) ([]ofpwire.Message, error) {
	var msgs []ofpwire.Message
	for len(wire) > 0 {
		if len(wire) < ofpwire.HeaderLen {
			return nil, fmt.Errorf("bundle record: %d bytes left after message %d", len(wire), len(msgs))
		}
		h := ofpwire.ParseHeader(wire)
		if int(h.Length) < ofpwire.HeaderLen || int(h.Length) > len(wire) {
			return nil, fmt.Errorf("bundle record: message %d: length %d of %d bytes left", len(msgs)+1, h.Length, len(wire))
		}
		m, err := ofpwire.Decode(h, wire[ofpwire.HeaderLen:h.Length])
		if err != nil {
			return nil, fmt.Errorf("bundle record: message %d: %w", len(msgs)+1, err)
		}
		switch m.(type) {
		case *ofpwire.FlowMod, *ofpwire.GroupMod, *ofpwire.MeterMod:
		default:
			return nil, fmt.Errorf("bundle record: message %d: %T is not a table change", len(msgs)+1, m)
		}
		msgs = append(msgs, m)
		wire = wire[h.Length:]
	}
	return msgs, nil
}

// ParseChange reads a journal record's payload back: one change, or the changes of
// a bundle commit (bundle true).
func ParseChange(r string) (msgs []ofpwire.Message, bundle bool, err error) {
	if items, ok := strings.CutPrefix(r, wireBundleRecord); ok {
		for it := range strings.SplitSeq(items, "\t") {
			if strings.IndexByte(it, ' ') >= 0 {
				m, err := parseMod(it)
				if err != nil {
					return nil, true, err
				}
				msgs = append(msgs, m)
				continue
			}
			wire, err := base64.StdEncoding.DecodeString(it)
			if err != nil {
				return nil, true, fmt.Errorf("bundle record: %w", err)
			}
			ms, err := parseWireBundle(wire)
			if err != nil {
				return nil, true, err
			}
			msgs = append(msgs, ms...)
		}
		return msgs, true, nil
	}
	rest, bundle := strings.CutPrefix(r, bundleRecord)
	if !bundle {
		m, err := parseMod(r)
		return []ofpwire.Message{m}, false, err
	}
	for _, l := range strings.Split(rest, "\t") {
		m, err := parseMod(l)
		if err != nil {
			return nil, true, err
		}
		msgs = append(msgs, m)
	}
	return msgs, true, nil
}

// parseMod reads a journal line back into the message.
func parseMod(line string) (ofpwire.Message, error) {
	kind, rest, _ := strings.Cut(line, " ")
	cmd, spec, _ := strings.Cut(rest, " ")
	switch kind {
	case "flow":
		for c, name := range flowCommands {
			if name == cmd {
				return ofptext.ParseFlow(spec, ofptext.Command(c))
			}
		}
	case "group":
		for c, name := range groupCommands {
			if name == cmd {
				return ofptext.ParseGroup(spec, c, ofptext.ParseFlowOptions{})
			}
		}
	case "meter":
		for c, name := range meterCommands {
			if name == cmd {
				return ofptext.ParseMeter(spec, c)
			}
		}
	}
	return nil, fmt.Errorf("journal line %q is not FLOW|GROUP|METER COMMAND SPEC", line)
}

var (
	flowCommands = map[ofpwire.FlowModCommand]string{ofpwire.FlowAdd: "add", ofpwire.FlowModify: "modify",
		ofpwire.FlowModifyStrict: "modify_strict", ofpwire.FlowDelete: "delete", ofpwire.FlowDeleteStrict: "delete_strict"}
	groupCommands = map[ofpwire.GroupCommand]string{ofpwire.GroupAdd: "add", ofpwire.GroupModify: "modify", ofpwire.GroupDelete: "delete"}
	meterCommands = map[ofpwire.MeterCommand]string{ofpwire.MeterAdd: "add", ofpwire.MeterModify: "modify", ofpwire.MeterDelete: "delete"}
)

// Print writes the changes of a journal file's contents to w as
// text, one per line in the records' own syntax ("flow add SPEC"), a
// bundle's after a comment line naming it: a bundle's record is OpenFlow
// bytes in base64, which no pager shows, and after --recover the changes
// of a file moved aside are to be read and re-added by hand. It stops at
// damage, saying where, and returns it as a *Damage (a torn last
// record is only noted).
func Print(w io.Writer, path string, data []byte) error {
	jc := parseJournal(data)
	bw := bufio.NewWriter(w)
	for i, r := range jc.records {
		msgs, bundle, err := ParseChange(r)
		switch {
		case err != nil:
			fmt.Fprintf(bw, "# record %d not understood: %v: %s\n", i+1, err, printable([]byte(r)))
		case !bundle:
			fmt.Fprintf(bw, "%s\n", r)
		default:
			fmt.Fprintf(bw, "# record %d: a bundle commit of %d changes\n", i+1, len(msgs))
			for _, m := range msgs {
				l, err := FormatMod(m)
				if err != nil {
					l = "# " + err.Error()
				}
				fmt.Fprintf(bw, "%s\n", l)
			}
		}
	}
	var dmg error
	switch {
	case jc.damage != "" && jc.torn:
		fmt.Fprintf(bw, "# record %d (byte offset %d) is a torn last write, never acknowledged: %s\n", len(jc.records)+1, jc.good, jc.damage)
	case jc.damage != "":
		dmg = &Damage{Path: path, Record: len(jc.records) + 1, Offset: jc.good, Size: int64(len(data)), Reason: jc.damage}
		fmt.Fprintf(bw, "# damaged at record %d (byte offset %d of %d): %s; nothing after it is read\n",
			len(jc.records)+1, jc.good, len(data), jc.damage)
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return dmg
}

// Check returns the damage found in the journal at path other than a
// torn last record (a *Damage), or why it cannot be read; a journal that
// does not exist is fine. It changes nothing: start-up checks every
// bridge's journal before it opens any.
func Check(path string) error {
	f, err := openFile(path, os.O_RDONLY)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("flow journal: %w", err)
	}
	data, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("flow journal: %w", err)
	}
	if jc := parseJournal(data); jc.damage != "" && !jc.torn {
		return &Damage{Path: path, Record: len(jc.records) + 1, Offset: jc.good, Size: int64(len(data)), Reason: jc.damage}
	}
	return nil
}
