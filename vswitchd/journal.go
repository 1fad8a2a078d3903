package vswitchd

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/vswitch-go/vswitch/internal/statedir"
	"github.com/vswitch-go/vswitch/ofproto/ofptext"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// JournalSuffix follows a bridge's name to make the file its OpenFlow
// changes are journaled in between two snapshots of its tables.
const JournalSuffix = ".journal"

// A flow table journal makes every acknowledged OpenFlow change durable at
// the cost of one appended record instead of a rewrite of the whole table:
// ovs-ofctl sends a barrier after every flow-mod, so saving the table at
// each would make loading N flows cost O(N²). The snapshot in the config
// store plus the journal replayed in order give the tables back; the
// daemon takes a new snapshot and empties the journal when the switch is
// quiet or the journal has grown as large as the tables.
//
// The record is written before the change is applied (bridge.logTableMod),
// so a change the journal cannot take is refused instead of living in
// memory only; a change the tables then refuse is cut back off the file.
//
// On disk (format 2): the line journalHeader, then one record per change,
// "LLLLLLLL CCCCCCCC PAYLOAD\n": the payload's length and its CRC32C
// (Castagnoli) as 8 hex digits each, and the payload, a change in
// ovs-ofctl syntax (formatMod). The length says where the record must end,
// so a record cut short, overwritten or padded is told from a good one;
// the file stays readable with a pager.
type journal struct {
	path    string
	f       *os.File
	size    int64 // bytes of whole records (and the header) in the file
	records int
	// unsynced is set when records were appended since the last fsync.
	unsynced bool
	// broken is set when an append failed and its partial record could not
	// be cut back: appending more would bury damage in the middle of the
	// file, so appends are refused until reset rewrites it.
	broken error
}

// journalHeader opens every format 2 journal. A file without it is read
// as format 1 (one bare change per line, no checksums) and rewritten.
const journalHeader = "vswitchd-flow-journal 2\n"

// maxJournalRecord bounds a record's payload: formatMod renders a change
// of at most 64 KiB of OpenFlow in far less, so a larger length is damage,
// and the bound keeps a damaged length from claiming the rest of the file.
const maxJournalRecord = 1 << 20

const recordHeaderLen = 18 // "LLLLLLLL CCCCCCCC "

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeRecord renders one record of the format above.
func encodeRecord(dst []byte, payload string) []byte {
	dst = fmt.Appendf(dst, "%08x %08x ", len(payload), crc32.Checksum([]byte(payload), castagnoli))
	dst = append(dst, payload...)
	return append(dst, '\n')
}

// JournalDamage describes a journal whose damage is not a torn last
// record: start-up refuses it, since the records after the damage were
// acknowledged and dropping them silently would lose flows.
type JournalDamage struct {
	Path string
	// Record is the damaged record's number (1 for the first) and Offset
	// its byte offset in the file; Good counts the whole records before it.
	Record int
	Offset int64
	Size   int64
	Reason string
}

func (e *JournalDamage) Error() string {
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
	if !bytes.HasPrefix(data, []byte(journalHeader)) {
		if len(data) < len(journalHeader) && bytes.HasPrefix([]byte(journalHeader), data) {
			// The header itself was being written.
			return journalContents{damage: "header cut short", torn: true}
		}
		return parseLegacyJournal(data)
	}
	jc := journalContents{good: int64(len(journalHeader))}
	off := len(journalHeader)
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

// openJournalFile opens a journal file without following a symbolic link
// (the state directory is the daemon's own; a link there is not) and with
// mode 0600 whatever the umask: it holds the switch's whole policy.
func openJournalFile(path string, flag int) (*os.File, error) {
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

// openJournal opens (creating) the journal at path and returns the
// records it holds. A torn last record was never acknowledged: it is cut
// off with a warning. Other damage is a *JournalDamage and leaves the file
// untouched, unless recoverDamaged is set: then the file is moved aside
// (PATH.corrupt-TIMESTAMP), and a new journal keeps the records before the
// damage. A format 1 journal is rewritten as format 2.
func openJournal(path string, recoverDamaged bool, log *slog.Logger) (*journal, []string, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f, err := openJournalFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND)
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
		dmg := &JournalDamage{Path: path, Record: len(jc.records) + 1, Offset: jc.good, Size: int64(len(data)), Reason: jc.damage}
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
		j, err := rewriteJournal(path, jc.records)
		return j, jc.records, err
	case jc.torn:
		log.Warn("flow journal: dropped a torn last record (never acknowledged)", "journal", path,
			"record", len(jc.records)+1, "offset", jc.good, "dropped-bytes", int64(len(data))-jc.good, "reason", jc.damage)
		if jc.legacy || jc.good == 0 {
			f.Close()
			j, err := rewriteJournal(path, jc.records)
			return j, jc.records, err
		}
		if err := f.Truncate(jc.good); err != nil {
			f.Close()
			return nil, nil, err
		}
	case jc.legacy || len(data) == 0:
		f.Close()
		if jc.legacy {
			log.Info("flow journal: format 1 rewritten as format 2", "journal", path, "records", len(jc.records))
		}
		j, err := rewriteJournal(path, jc.records)
		return j, jc.records, err
	}
	return &journal{path: path, f: f, size: jc.good, records: len(jc.records)}, jc.records, nil
}

// rewriteJournal replaces the journal at path with one holding records,
// through a synced temporary file renamed over it, and opens it.
func rewriteJournal(path string, records []string) (*journal, error) {
	buf := []byte(journalHeader)
	for _, r := range records {
		buf = encodeRecord(buf, r)
	}
	if err := statedir.ReplaceFile(path, path+".tmp", buf, 0o600); err != nil {
		return nil, err
	}
	f, err := openJournalFile(path, os.O_RDWR|os.O_APPEND)
	if err != nil {
		return nil, err
	}
	return &journal{path: path, f: f, size: int64(len(buf)), records: len(records)}, nil
}

// append writes one record in one write call. On failure (a full disk,
// an I/O error) whatever part of it reached the file is cut back, so the
// file still ends with a whole record; if even that fails the journal is
// broken until reset.
func (j *journal) append(payload string) error {
	if j.broken != nil {
		return fmt.Errorf("journal unusable since an earlier failure: %w", j.broken)
	}
	if strings.IndexByte(payload, '\n') >= 0 || len(payload) > maxJournalRecord {
		return fmt.Errorf("record %.40q cannot be journaled", payload)
	}
	rec := encodeRecord(make([]byte, 0, recordHeaderLen+len(payload)+1), payload)
	if _, err := j.f.Write(rec); err != nil {
		if terr := j.f.Truncate(j.size); terr != nil {
			j.broken = err
		}
		return err
	}
	j.size += int64(len(rec))
	j.records++
	j.unsynced = true
	return nil
}

// undoLast cuts off the record of length n just appended (its change was
// refused after all).
func (j *journal) undoLast(payload string) error {
	n := int64(recordHeaderLen + len(payload) + 1)
	if err := j.f.Truncate(j.size - n); err != nil {
		j.broken = err
		return err
	}
	j.size -= n
	j.records--
	return nil
}

// sync makes the appended records durable.
func (j *journal) sync() error {
	if !j.unsynced {
		return nil
	}
	if err := j.f.Sync(); err != nil {
		return err
	}
	j.unsynced = false
	return nil
}

// reset empties the journal once a snapshot holds everything in it.
func (j *journal) reset() error {
	if err := j.f.Truncate(0); err != nil {
		return err
	}
	j.records, j.size, j.unsynced = 0, 0, false
	if _, err := io.WriteString(j.f, journalHeader); err != nil {
		j.broken = err
		return err
	}
	j.size = int64(len(journalHeader))
	j.broken = nil
	return j.f.Sync()
}

func (j *journal) close() error { return j.f.Close() }

// formatMod renders a FLOW_MOD, GROUP_MOD or METER_MOD as a journal line:
// "flow|group|meter COMMAND SPEC", SPEC in ovs-ofctl syntax.
func formatMod(msg ofpwire.Message) (string, error) {
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

// bundleRecord starts the journal record of a bundle commit, whose
// changes follow separated by tabs.
const bundleRecord = "bundle "

// formatBundle renders a bundle commit as one journal record.
func formatBundle(msgs []ofpwire.Message) (string, error) {
	lines := make([]string, len(msgs))
	n := len(bundleRecord)
	for i, m := range msgs {
		l, err := formatMod(m)
		if err != nil {
			return "", err
		}
		if strings.ContainsAny(l, "\t\n") {
			return "", fmt.Errorf("change %.40q cannot be journaled in a bundle", l)
		}
		lines[i] = l
		if n += len(l) + 1; n > maxJournalRecord {
			return "", fmt.Errorf("bundle of %d changes exceeds a journal record", len(msgs))
		}
	}
	return bundleRecord + strings.Join(lines, "\t"), nil
}

// parseChange reads a journal record's payload back: one change, or the changes of
// a bundle commit (bundle true).
func parseChange(r string) (msgs []ofpwire.Message, bundle bool, err error) {
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
