package flowjournal

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

func TestJournalRecordsRoundTrip(t *testing.T) {
	for _, line := range []string{
		"flow add table=2,priority=100,cookie=0x5,ip,nw_dst=198.18.0.2 actions=output:2",
		"flow delete_strict table=2,priority=100,ip,nw_dst=198.18.0.2",
		"flow modify in_port=1 actions=drop",
		"flow delete",
		"group add group_id=1,type=select,bucket=weight:10,actions=output:1,bucket=weight:20,actions=output:2",
		"group delete group_id=1",
		"meter add meter=1,pktps,burst,band=type=drop,rate=1000,burst_size=100",
		"meter delete meter=1",
	} {
		m, err := parseMod(line)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		again, err := FormatMod(m)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := parseMod(again)
		if err != nil {
			t.Fatalf("%q (from %q): %v", again, line, err)
		}
		if third, _ := FormatMod(m2); third != again {
			t.Fatalf("not stable: %q → %q → %q", line, again, third)
		}
	}
	for _, bad := range []string{"", "flow", "flow frob x", "port add x", "group add group_id=x"} {
		if _, err := parseMod(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestJournalBundleRecord: a bundle commit is one record holding its
// changes in order, read back as a bundle, whether written as OpenFlow
// messages (format 3) or as tab-joined ovs-ofctl changes (format 2, an
// older vswitchd's); one too large for a record is refused (the caller
// then saves the tables whole).
func TestJournalBundleRecord(t *testing.T) {
	lines := []string{
		"group add group_id=4,type=all,bucket=actions=output:1",
		"flow add priority=7,udp actions=group:4",
		"flow delete_strict priority=6,tcp",
		"flow add table=3,priority=9,ip,reg1=0x5,nw_dst=198.18.0.0/16 actions=move:NXM_NX_REG1[0..15]->NXM_NX_REG2[16..31],load:0x7->NXM_NX_REG3[],resubmit(,4),conjunction(3,1/2)",
		"group add group_id=5,type=select,selection_method=hash,fields(ip_src),bucket=weight:10,actions=output:1,bucket=weight:20,actions=output:2",
	}
	var msgs []ofpwire.Message
	for _, l := range lines {
		m, err := parseMod(l)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	readRecord := func(rec []byte, kind string) string {
		t.Helper()
		jc := parseJournal(append([]byte(journalHeader), rec...))
		if jc.damage != "" || len(jc.records) != 1 || !strings.HasPrefix(jc.records[0], kind) {
			t.Fatalf("bundle record read as %d records, damage %q: %.60q", len(jc.records), jc.damage, jc.records)
		}
		return jc.records[0]
	}
	// The select group's selection_method has no OpenFlow encoding here:
	// that change is an item of text between the messages'.
	wireRec, err := EncodeBundleRecord(nil, msgs[:4])
	if err != nil {
		t.Fatal(err)
	}
	mixed := append(slices.Clone(msgs), msgs[1], msgs[4], msgs[4])
	mixedRec, err := EncodeBundleRecord(nil, mixed)
	if err != nil {
		t.Fatal(err)
	}
	mixedPayload := readRecord(mixedRec, wireBundleRecord)
	if items := strings.Split(strings.TrimPrefix(mixedPayload, wireBundleRecord), "\t"); len(items) != 5 ||
		!strings.HasPrefix(items[1], "group add group_id=5,type=select,selection_method=hash") || strings.Contains(items[2], " ") {
		t.Fatalf("items %.80q", items)
	}
	if strings.Contains(readRecord(wireRec, wireBundleRecord), "\t") {
		t.Fatal("a bundle the codec carries whole was split into items")
	}
	for _, form := range []struct {
		name, payload string
		msgs          []ofpwire.Message
	}{
		{"wire", readRecord(wireRec, wireBundleRecord), msgs[:4]},
		{"mixed", mixedPayload, mixed},
		{"format-2", bundleRecord + strings.Join(lines, "\t"), msgs},
	} {
		got, bundle, err := ParseChange(form.payload)
		if err != nil || !bundle || len(got) != len(form.msgs) {
			t.Fatalf("%s: read back %d messages (bundle %v): %v", form.name, len(got), bundle, err)
		}
		for i := range got {
			a, _ := FormatMod(got[i])
			b, _ := FormatMod(form.msgs[i])
			if a != b {
				t.Errorf("%s: change %d: %q, want %q", form.name, i, a, b)
			}
		}
	}
	if got, bundle, err := ParseChange(lines[1]); err != nil || bundle || len(got) != 1 {
		t.Fatalf("a single change read as %d messages (bundle %v): %v", len(got), bundle, err)
	}
	if _, err := EncodeBundleRecord(nil, []ofpwire.Message{&ofpwire.BarrierRequest{}}); err == nil {
		t.Fatal("a barrier was journaled as a bundle's change")
	}
	big := []ofpwire.Message{&ofpwire.FlowMod{Command: ofpwire.FlowAdd, BufferID: ofpwire.NoBuffer, OutPort: ofpwire.PortAny,
		OutGroup: ofpwire.GroupAny, Instructions: []ofpwire.Instruction{&ofpwire.InstrApplyActions{Actions: []ofpwire.Action{
			&ofpwire.ActionNote{Note: make([]byte, 60000)}}}}}}
	for len(big) < maxJournalRecord*3/4/60000+1 {
		big = append(big, big[0])
	}
	if _, err := EncodeBundleRecord(nil, big); err == nil {
		t.Fatal("a bundle larger than a journal record was encoded")
	}
}

// TestJournalBundleWire: a bundle recorded from its messages as the peer
// sent them (EncodeBundleWire: in their own version, with their xids, in
// chunks) reads back as those messages; an empty bundle reads back empty.
func TestJournalBundleWire(t *testing.T) {
	lines := []string{
		"group add group_id=4,type=all,bucket=actions=output:1",
		"flow add priority=7,udp actions=group:4",
		"flow delete_strict priority=6,tcp",
		"flow add table=3,priority=9,ip,reg1=0x5,nw_dst=198.18.0.0/16 actions=move:NXM_NX_REG1[0..15]->NXM_NX_REG2[16..31],load:0x7->NXM_NX_REG3[],resubmit(,4),conjunction(3,1/2)",
	}
	for _, v := range []uint8{ofpwire.Version13, ofpwire.Version14, ofpwire.Version15} {
		var msgs []ofpwire.Message
		var chunks [][]byte
		for i, l := range lines {
			m, err := parseMod(l)
			if err != nil {
				t.Fatal(err)
			}
			b, err := ofpwire.EncodeIn(v, uint32(1000+i), m)
			if err != nil {
				t.Fatal(err)
			}
			back, err := ofpwire.Decode(ofpwire.ParseHeader(b), b[ofpwire.HeaderLen:])
			if err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, back)
			if i%2 == 0 {
				chunks = append(chunks, nil)
			}
			chunks[len(chunks)-1] = append(chunks[len(chunks)-1], b...)
		}
		rec, err := EncodeBundleWire(nil, chunks, len(msgs))
		if err != nil {
			t.Fatal(err)
		}
		jc := parseJournal(append([]byte(journalHeader), rec...))
		if jc.damage != "" || len(jc.records) != 1 {
			t.Fatalf("version %d: read as %d records, damage %q", v, len(jc.records), jc.damage)
		}
		got, bundle, err := ParseChange(jc.records[0])
		if err != nil || !bundle || !reflect.DeepEqual(got, msgs) {
			t.Fatalf("version %d: read back %+v (bundle %v, %v), want %+v", v, got, bundle, err, msgs)
		}
	}
	rec, err := EncodeBundleWire(nil, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	jc := parseJournal(append([]byte(journalHeader), rec...))
	if got, bundle, err := ParseChange(jc.records[0]); err != nil || !bundle || len(got) != 0 {
		t.Fatalf("empty bundle read back as %d messages (bundle %v): %v", len(got), bundle, err)
	}
	big := make([]byte, maxJournalRecord*3/4+1)
	if _, err := EncodeBundleWire(nil, [][]byte{big}, 1); err == nil {
		t.Fatal("a bundle larger than a journal record was encoded")
	}
}

// TestJournalWireBundleDamage: a bundle record whose checksum is right but
// whose messages are not (a vswitchd bug, or a hand-made file) is refused
// by ParseChange, never half read.
func TestJournalWireBundleDamage(t *testing.T) {
	m, _ := parseMod("flow add priority=7,udp actions=drop")
	rec, err := EncodeBundleRecord(nil, []ofpwire.Message{m, m})
	if err != nil {
		t.Fatal(err)
	}
	payload := string(rec[recordHeaderLen : len(rec)-1])
	wire, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(payload, wireBundleRecord))
	if !strings.HasPrefix(payload, wireBundleRecord) {
		t.Fatalf("not a wire record: %.40q", payload)
	}
	for name, w := range map[string][]byte{
		"cut":      wire[:len(wire)-3],
		"header":   append(slices.Clone(wire), 4, 14),
		"zero-len": append(slices.Clone(wire), 4, 14, 0, 0, 0, 0, 0, 0),
		"barrier":  append(slices.Clone(wire), 4, 20, 0, 8, 0, 0, 0, 0),
		"bad-flow": append(slices.Clone(wire), 4, 14, 0, 9, 0, 0, 0, 0, 0),
		"not-b64":  []byte("!"),
	} {
		p := wireBundleRecord + base64.StdEncoding.EncodeToString(w)
		if name == "not-b64" {
			p = wireBundleRecord + "!!!!"
		}
		if msgs, _, err := ParseChange(p); err == nil {
			t.Errorf("%s: read as %d messages", name, len(msgs))
		}
	}
}

// FuzzJournalChange: a record's payload (a checksum guards it against
// damage, not against a vswitchd that wrote garbage) never panics the
// reader, and a bundle read from OpenFlow messages encodes back to a
// record that reads the same.
func FuzzJournalChange(f *testing.F) {
	m, _ := parseMod("flow add table=3,priority=9,ip,reg1=0x5 actions=load:0x7->NXM_NX_REG3[],resubmit(,4)")
	g, _ := parseMod("group add group_id=4,type=all,bucket=actions=output:1")
	rec, _ := EncodeBundleRecord(nil, []ofpwire.Message{g, m})
	f.Add(string(rec[recordHeaderLen : len(rec)-1]))
	f.Add(bundleRecord + "flow add priority=1,actions=drop\tflow delete")
	f.Add("flow add priority=1,actions=drop")
	f.Add(wireBundleRecord)
	f.Fuzz(func(t *testing.T, payload string) {
		msgs, bundle, err := ParseChange(payload)
		if err != nil || !bundle || !strings.HasPrefix(payload, wireBundleRecord) {
			return
		}
		rec, err := EncodeBundleRecord(nil, msgs)
		if err != nil {
			t.Fatalf("%d messages read do not encode: %v", len(msgs), err)
		}
		again, _, err := ParseChange(string(rec[recordHeaderLen : len(rec)-1]))
		if err != nil || !reflect.DeepEqual(again, msgs) {
			t.Fatalf("re-encoded bundle reads %v (%v), want %v", again, err, msgs)
		}
	})
}

// journalFile renders records as a format 3 journal.
func journalFile(records ...string) []byte { return journalFileWith(journalHeader, records...) }

// journalFileWith renders records after header (format 2 or 3).
func journalFileWith(header string, records ...string) []byte {
	b := []byte(header)
	for _, r := range records {
		b = encodeRecord(b, r)
	}
	return b
}

func threeRecords() []string {
	return []string{"flow add priority=1,actions=drop", "flow add priority=2,actions=drop", "flow add priority=3,actions=drop"}
}

// TestJournalTornTail: a record the process died writing (cut short, or a
// tail of NULs the file system extended the file with) was never
// acknowledged; it is dropped and the file cut back, and appends continue
// after the last whole record.
func TestJournalTornTail(t *testing.T) {
	full := journalFile(threeRecords()...)
	for name, data := range map[string][]byte{
		"cut":   full[:len(full)-5],
		"nuls":  append(journalFile(threeRecords()[:2]...), make([]byte, 4096)...),
		"hdr":   append(journalFile(threeRecords()[:2]...), "0000"...),
		"nonl":  journalFile(threeRecords()...)[:len(full)-1],
		"dirty": append(journalFile(threeRecords()[:2]...), "00000020 12345678 flow add prio"...),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "br0.journal")
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			j, lines, err := Open(path, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(lines, threeRecords()[:2]) || j.records != 2 {
				t.Fatalf("lines %q records %d", lines, j.records)
			}
			if err := j.Append("flow add d"); err != nil {
				t.Fatal(err)
			}
			j.Close()
			got, _ := os.ReadFile(path)
			if want := journalFile(append(threeRecords()[:2], "flow add d")...); string(got) != string(want) {
				t.Fatalf("file %q", got)
			}
		})
	}
}

// TestJournalDamageRefused: damage before the last record (acknowledged
// records follow it) is reported with the record's number and offset and
// leaves the file as it was.
func TestJournalDamageRefused(t *testing.T) {
	recs := threeRecords()
	good := journalFile(recs...)
	second := len(journalFile(recs[0]))
	corrupt := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for name, c := range map[string]struct {
		data   []byte
		record int
		offset int
	}{
		"flipped": {corrupt(func(b []byte) []byte { b[second+recordHeaderLen+3] ^= 1; return b }), 2, second},
		"garbage": {corrupt(func(b []byte) []byte {
			return append(b[:second], append([]byte("this is not a record\n"), b[second:]...)...)
		}), 2, second},
		"nuls": {corrupt(func(b []byte) []byte { copy(b[second:second+10], make([]byte, 10)); return b }), 2, second},
		"long": {corrupt(func(b []byte) []byte {
			return append(b[:second], append(append(bytes.Repeat([]byte("x"), 17<<20), '\n'), b[second:]...)...)
		}), 2, second},
		"length": {corrupt(func(b []byte) []byte { b[len(journalHeader)+7] = 'f'; return b }), 1, len(journalHeader)},
		"legacy": {[]byte("flow add priority=1,actions=drop\n\x00\x00garbage\nflow add priority=2,actions=drop\n"), 2, 33},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "br0.journal")
			if err := os.WriteFile(path, c.data, 0o600); err != nil {
				t.Fatal(err)
			}
			_, _, err := Open(path, false, nil)
			var dmg *Damage
			if !errors.As(err, &dmg) {
				t.Fatalf("opened: %v", err)
			}
			if dmg.Record != c.record || dmg.Offset != int64(c.offset) {
				t.Fatalf("damage at record %d offset %d, want %d at %d: %v", dmg.Record, dmg.Offset, c.record, c.offset, err)
			}
			if !strings.Contains(err.Error(), "--recover") {
				t.Fatalf("no way out offered: %v", err)
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, c.data) {
				t.Fatal("the damaged journal was modified")
			}
		})
	}
}

// TestJournalRecover: recovering keeps the records before the damage in a
// new journal and moves the damaged file aside, intact.
func TestJournalRecover(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "br0.journal")
	recs := threeRecords()
	data := journalFile(recs...)
	data = append(data[:len(journalFile(recs[:2]...))], append([]byte("garbage\n"), data[len(journalFile(recs[:2]...)):]...)...)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	j, lines, err := Open(path, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
	if !slices.Equal(lines, recs[:2]) {
		t.Fatalf("kept %q", lines)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, journalFile(recs[:2]...)) {
		t.Fatalf("new journal %q", got)
	}
	aside, _ := filepath.Glob(path + ".corrupt-*")
	if len(aside) != 1 {
		t.Fatalf("moved aside: %q", aside)
	}
	if got, _ := os.ReadFile(aside[0]); !bytes.Equal(got, data) {
		t.Fatal("the file moved aside is not the damaged journal")
	}
}

// TestJournalLegacyUpgrade: a format 1 journal (bare lines) is read once
// and rewritten as format 2.
func TestJournalLegacyUpgrade(t *testing.T) {
	path := filepath.Join(t.TempDir(), "br0.journal")
	if err := os.WriteFile(path, []byte("flow add a\nflow add b\nflow add c-torn"), 0o644); err != nil {
		t.Fatal(err)
	}
	j, lines, err := Open(path, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
	if !slices.Equal(lines, []string{"flow add a", "flow add b"}) || j.records != 2 {
		t.Fatalf("lines %q records %d", lines, j.records)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, journalFile("flow add a", "flow add b")) {
		t.Fatalf("not rewritten: %q", got)
	}
}

// TestJournalV2Upgrade: a format 2 journal (an older vswitchd's, its
// bundle a text record) is read, a torn last record dropped, and the file
// rewritten as format 3 with the same records; one damaged before its
// end is refused untouched, as any other.
func TestJournalV2Upgrade(t *testing.T) {
	recs := append(threeRecords(), bundleRecord+"flow add priority=4,actions=drop\tflow add priority=5,actions=drop")
	for name, data := range map[string][]byte{
		"whole": journalFileWith(journalHeaderV2, recs...),
		"torn":  append(journalFileWith(journalHeaderV2, recs...), "00000020 12345678 flow add prio"...),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "br0.journal")
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			j, got, err := Open(path, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, recs) || j.records != len(recs) {
				t.Fatalf("records %q (%d)", got, j.records)
			}
			if err := j.Append("flow add d"); err != nil {
				t.Fatal(err)
			}
			j.Close()
			if got, _ := os.ReadFile(path); !bytes.Equal(got, journalFile(append(slices.Clone(recs), "flow add d")...)) {
				t.Fatalf("not rewritten as format 3: %q", got)
			}
		})
	}
	path := filepath.Join(t.TempDir(), "br0.journal")
	bad := journalFileWith(journalHeaderV2, recs...)
	bad[len(journalHeaderV2)+recordHeaderLen+2] ^= 1
	os.WriteFile(path, bad, 0o600)
	if _, _, err := Open(path, false, nil); err == nil {
		t.Fatal("a damaged format 2 journal was opened")
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, bad) {
		t.Fatal("the damaged journal was modified")
	}
}

// TestPrintJournal: a journal prints as its changes in text, a bundle's
// OpenFlow record included, and damage stops the print and is returned.
func TestPrintJournal(t *testing.T) {
	a, _ := parseMod("flow add priority=7,udp actions=drop")
	b, _ := parseMod("flow add table=3,priority=9,ip,reg1=0x5 actions=load:0x7->NXM_NX_REG3[],resubmit(,4)")
	rec, err := EncodeBundleRecord(nil, []ofpwire.Message{a, b})
	if err != nil {
		t.Fatal(err)
	}
	data := append(journalFile("flow add priority=1,actions=drop"), rec...)
	var out strings.Builder
	if err := Print(&out, "j", data); err != nil {
		t.Fatal(err)
	}
	la, _ := FormatMod(a)
	lb, _ := FormatMod(b)
	want := "flow add priority=1,actions=drop\n# record 2: a bundle commit of 2 changes\n" + la + "\n" + lb + "\n"
	if out.String() != want {
		t.Fatalf("printed %q, want %q", out.String(), want)
	}
	out.Reset()
	bad := append(slices.Clone(data), "garbage\n"...)
	bad = append(bad, journalFile("flow add x")[len(journalHeader):]...)
	var dmg *Damage
	if err := Print(&out, "j", bad); !errors.As(err, &dmg) || dmg.Record != 3 || !strings.HasPrefix(out.String(), want) ||
		!strings.Contains(out.String(), "# damaged at record 3") || strings.Contains(out.String(), "flow add x") {
		t.Fatalf("damaged journal: %v, printed %q", err, out.String())
	}
}

// TestJournalFileSafety: the journal is created 0600 whatever the umask,
// an existing one is tightened to 0600, and a symbolic link in its place
// is refused rather than followed.
func TestJournalFileSafety(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := t.TempDir()
	path := filepath.Join(dir, "br0.journal")
	j, _, err := Open(path, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Reset(); err != nil {
		t.Fatal(err)
	}
	j.Close()
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode())
	}
	os.Chmod(path, 0o666)
	j, _, err = Open(path, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Fatalf("mode of an existing journal %v", st.Mode())
	}
	target := filepath.Join(dir, "elsewhere")
	os.WriteFile(target, nil, 0o644)
	link := filepath.Join(dir, "br1.journal")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(link, false, nil); !errors.Is(err, syscall.ELOOP) {
		t.Fatalf("opened through a symlink: %v", err)
	}
	if got, _ := os.ReadFile(target); len(got) != 0 {
		t.Fatal("the link's target was written")
	}
}

// TestJournalAppendUndo: a record taken back leaves the file as before.
func TestJournalAppendUndo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "br0.journal")
	j, _, err := Open(path, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if err := j.Append("flow add a"); err != nil {
		t.Fatal(err)
	}
	if err := j.Append("flow add b"); err != nil {
		t.Fatal(err)
	}
	rec, _ := ChangeRecord("flow add b")
	if err := j.UndoLast(rec, 1); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, journalFile("flow add a")) || j.records != 1 {
		t.Fatalf("file %q records %d", got, j.records)
	}
	if err := j.Append("flow add\nb"); err == nil {
		t.Fatal("a payload with a newline was journaled")
	}
}

// FuzzJournalParse: the journal reader never panics, never reads past
// the file, and what it accepts re-encodes to the accepted prefix.
func FuzzJournalParse(f *testing.F) {
	f.Add(journalFile(threeRecords()...))
	f.Add([]byte("flow add a\nflow add b\n"))
	f.Add(append(journalFile("flow add a"), 0, 0, 0))
	f.Add([]byte(journalHeader + "00000003 00000000 abc\n"))
	f.Add(journalFileWith(journalHeaderV2, threeRecords()...))
	f.Fuzz(func(t *testing.T, data []byte) {
		jc := parseJournal(data)
		if jc.good < 0 || jc.good > int64(len(data)) {
			t.Fatalf("good prefix %d of %d", jc.good, len(data))
		}
		if (jc.damage == "") != (jc.good == int64(len(data))) && !(jc.damage == "" && len(data) == 0) {
			t.Fatalf("damage %q with good %d of %d", jc.damage, jc.good, len(data))
		}
		if !jc.legacy && jc.good > 0 {
			header := journalHeader
			if jc.v2 {
				header = journalHeaderV2
			}
			if again := journalFileWith(header, jc.records...); !bytes.Equal(again, data[:jc.good]) {
				t.Fatalf("records %q re-encode to %q, not %q", jc.records, again, data[:jc.good])
			}
		}
	})
}

// BenchmarkBundleRecord: the save path of a bundle commit, per 10,000
// OVN-shaped flow-mods (registers, move, load, resubmit): the record
// written before the commit, and its reading back at a restart.
func BenchmarkBundleRecord(b *testing.B) {
	var msgs []ofpwire.Message
	for i := range 10000 {
		m, err := parseMod(fmt.Sprintf("flow add table=%d,priority=%d,ip,reg14=0x%x,metadata=0x1,nw_src=198.18.%d.%d "+
			"actions=move:NXM_NX_REG14[]->NXM_NX_REG15[],load:0x%x->NXM_NX_REG10[0..15],resubmit(,%d)",
			8+i%30, 100+i%7, i, i/256%256, i%256, i, 9+i%30))
		if err != nil {
			b.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	rec, _ := EncodeBundleRecord(nil, msgs)
	b.Run("encode", func(b *testing.B) {
		b.SetBytes(int64(len(rec)))
		for b.Loop() {
			if _, err := EncodeBundleRecord(nil, msgs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("text", func(b *testing.B) {
		for b.Loop() {
			if _, err := textBundleRecord(nil, msgs); err != nil {
				b.Fatal(err)
			}
		}
	})
	payload := string(rec[recordHeaderLen : len(rec)-1])
	b.Run("read", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := ParseChange(payload); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// textBundleRecord appends the record of a bundle commit as format 2
// wrote it: its changes in ovs-ofctl syntax, separated by tabs.
func textBundleRecord(dst []byte, msgs []ofpwire.Message) ([]byte, error) {
	lines := make([]string, len(msgs))
	for i, m := range msgs {
		l, err := FormatMod(m)
		if err != nil {
			return nil, err
		}
		lines[i] = l
	}
	return encodeRecord(dst, bundleRecord+strings.Join(lines, "\t")), nil
}
