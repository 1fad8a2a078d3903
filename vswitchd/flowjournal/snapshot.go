package flowjournal

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/vswitch-go/vswitch/internal/statedir"
	"github.com/vswitch-go/vswitch/vswitchd/config"
)

// SnapshotSuffix follows a bridge's name to make the file of its saved
// tables: the snapshot its journal's records apply on top of. A file per
// bridge, not a part of config.json, so that saving one bridge's tables
// does not write every bridge's, nor a configuration change any.
const SnapshotSuffix = ".tables"

// snapshotFormat lets a future layout refuse to misread an old file.
const snapshotFormat = 1

type snapshotFile struct {
	Format int `json:"format"`
	config.Tables
}

// ReadSnapshot reads the saved tables at path: nil when there are none
// (never saved); an error, naming the file, when it cannot be read or is
// not a snapshot of this format.
func ReadSnapshot(path string) (*config.Tables, error) {
	data, err := statedir.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("saved tables %s: %w", path, err)
	}
	var f snapshotFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("saved tables %s are corrupt (left untouched): %w", path, err)
	}
	if f.Format != snapshotFormat {
		return nil, fmt.Errorf("saved tables %s have format %d, this build reads format %d", path, f.Format, snapshotFormat)
	}
	if f.Flows == nil {
		f.Flows = []string{} // saved, and empty
	}
	for what, lines := range map[string][]string{"flow": f.Flows, "group": f.Groups, "meter": f.Meters} {
		for i, l := range lines {
			if strings.TrimSpace(l) == "" || strings.ContainsAny(l, "\n\r") {
				return nil, fmt.Errorf("saved tables %s are corrupt (left untouched): %s %d is empty or spans lines", path, what, i+1)
			}
		}
	}
	return &f.Tables, nil
}

// WriteSnapshot replaces the saved tables at path, durably: a crash
// leaves the old file or the new one (statedir.ReplaceFile).
func WriteSnapshot(path string, t *config.Tables) error {
	_, err := WriteSnapshotLines(path, slices.Values(t.Flows), t.Groups, t.Meters)
	return err
}

// WriteSnapshotLines is WriteSnapshot with the flows given one line at a
// time and written as they come: a table of 100,000 flows need not be
// held as text, then again as JSON, beside the tables themselves (that
// doubled a daemon's memory for the duration of a snapshot). It returns
// the number of flows written.
func WriteSnapshotLines(path string, flows iter.Seq[string], groups, meters []string) (int, error) {
	n := 0
	dir, base := filepath.Split(path)
	err := statedir.ReplaceFileWith(path, filepath.Join(dir, "."+base+".tmp"), 0o600, func(w io.Writer) error {
		buf := make([]byte, 0, 4096)
		buf = fmt.Appendf(buf, `{"format":%d,"flows":[`, snapshotFormat)
		for l := range flows {
			if n > 0 {
				buf = append(buf, ',')
			}
			buf = appendJSONString(buf, l)
			n++
			if len(buf) >= 4096 {
				if _, err := w.Write(buf); err != nil {
					return err
				}
				buf = buf[:0]
			}
		}
		buf = append(buf, ']')
		for _, sec := range []struct {
			name  string
			lines []string
		}{{"groups", groups}, {"meters", meters}} {
			if len(sec.lines) == 0 {
				continue // omitted, as config.Tables marshals them
			}
			buf = append(buf, `,"`+sec.name+`":[`...)
			for i, l := range sec.lines {
				if i > 0 {
					buf = append(buf, ',')
				}
				buf = appendJSONString(buf, l)
			}
			buf = append(buf, ']')
		}
		buf = append(buf, '}')
		_, err := w.Write(buf)
		return err
	})
	return n, err
}

// appendJSONString appends s as a JSON string. Flow lines are ASCII
// text; anything else is escaped so that the file is valid JSON whatever
// it holds (invalid UTF-8 becomes U+FFFD, as encoding/json writes it).
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[r>>4], hex[r&0xf])
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	return append(b, '"')
}
