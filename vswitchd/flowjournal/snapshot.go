package flowjournal

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

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
	f := snapshotFile{Format: snapshotFormat, Tables: *t}
	if f.Flows == nil {
		f.Flows = []string{}
	}
	data, err := json.Marshal(f)
	if err != nil {
		return err
	}
	dir, base := filepath.Split(path)
	return statedir.ReplaceFile(path, filepath.Join(dir, "."+base+".tmp"), data, 0o600)
}
