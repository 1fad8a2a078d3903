package vswitchd

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/vswitch-go/vswitch/internal/statedir"
	"github.com/vswitch-go/vswitch/ofproto"
	"github.com/vswitch-go/vswitch/ofproto/ofptext"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
	"github.com/vswitch-go/vswitch/vswitchd/config"
)

// A bridge's tables as the daemon saves them (in the bridge's tables file
// and the journal's records): ovs-ofctl lines through ofptext, over the
// bridge's text-free snapshot and restore (ofproto/snapshot.go).

// TablesSuffix follows a bridge's name to make the file of its saved
// tables: the snapshot its journal's records apply on top of. A file per
// bridge, not a part of config.json, so that saving one bridge's tables
// does not write every bridge's, nor a configuration change any.
const TablesSuffix = ".tables"

// tablesFormat lets a future layout refuse to misread an old file.
const tablesFormat = 1

type tablesFile struct {
	Format int `json:"format"`
	config.Tables
}

// tablesPath is the path of a bridge's saved tables.
func (d *Daemon) tablesPath(name string) string {
	return filepath.Join(d.opts.StateDir, name+TablesSuffix)
}

// readTables reads the saved tables at path: nil when there are none
// (never saved); an error, naming the file, when it cannot be read or
// is not a tables file of this format.
func readTables(path string) (*config.Tables, error) {
	data, err := statedir.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("saved tables %s: %w", path, err)
	}
	var f tablesFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("saved tables %s are corrupt (left untouched): %w", path, err)
	}
	if f.Format != tablesFormat {
		return nil, fmt.Errorf("saved tables %s have format %d, this build reads format %d", path, f.Format, tablesFormat)
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

// writeTables replaces the saved tables at path, durably: a crash leaves
// the old file or the new one (statedir.ReplaceFile).
func writeTables(path string, t *config.Tables) error {
	f := tablesFile{Format: tablesFormat, Tables: *t}
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

// moveLegacyTables moves the saved tables an older daemon kept in
// config.json to the bridges' tables files, before the store takes any
// update (which would drop them). A tables file already there is newer:
// a crash came between writing it and config.json.
func moveLegacyTables(dir string, store *config.Store, log interface{ Info(string, ...any) }) error {
	legacy := store.LegacyTables()
	if legacy == nil {
		return nil
	}
	for name, t := range legacy {
		path := filepath.Join(dir, name+TablesSuffix)
		if _, err := os.Lstat(path); err == nil {
			continue
		}
		if err := writeTables(path, t); err != nil {
			return fmt.Errorf("moving bridge %q's saved tables out of %s: %w", name, config.StateFile, err)
		}
	}
	if err := store.ForgetLegacyTables(); err != nil {
		return fmt.Errorf("moving the saved tables out of %s: %w", config.StateFile, err)
	}
	log.Info("saved flow tables moved from "+config.StateFile+" to a file per bridge", "bridges", len(legacy))
	return nil
}

// flowLines returns every entry of every table as an ovs-ofctl add-flow
// line (ofptext.FlowLines: no counters, an order that depends only on the
// tables). restoreFlows reads it back; timeouts restart then.
func flowLines(of *ofproto.Bridge) []string { return ofptext.FlowLines(of.FlowMods()) }

// flowStates maps every entry's line, as flowLines gives it, to what the
// entry has accumulated (install time, last use, counters), for
// restoreFlows to carry over a datapath rebuild.
func flowStates(of *ofproto.Bridge) map[string]pipeline.EntryState {
	fms, sts := of.FlowModStates()
	out := make(map[string]pipeline.EntryState, len(fms))
	for i, fm := range fms {
		out[ofptext.FormatFlowMod(fm)] = sts[i]
	}
	return out
}

// restoreFlows replaces the flow tables with the flows lines describe
// (flowLines' output, or any ovs-ofctl add-flow lines), all or nothing
// (ofproto.Bridge.RestoreFlowMods); a line found in states (flowStates of
// the bridge the lines came from) keeps that entry's install time, last
// use and counters.
func restoreFlows(of *ofproto.Bridge, lines []string, states map[string]pipeline.EntryState) error {
	fms := make([]*ofpwire.FlowMod, 0, len(lines))
	for i, l := range lines {
		fm, err := ofptext.ParseFlow(l, ofptext.Add)
		if err != nil {
			return fmt.Errorf("ofproto: restoring flow %d: %w", i+1, err)
		}
		fms = append(fms, fm)
	}
	var keep func(int) (pipeline.EntryState, bool)
	if states != nil {
		keep = func(i int) (pipeline.EntryState, bool) {
			st, ok := states[lines[i]]
			return st, ok
		}
	}
	err := of.RestoreFlowMods(fms, keep)
	if re, ok := errors.AsType[*ofproto.RestoreError](err); ok {
		if re.Installing {
			return fmt.Errorf("ofproto: restoring %q: %w", ofptext.FormatFlowMod(fms[re.Index]), re.Err)
		}
		return fmt.Errorf("ofproto: restoring flow %d %q: %w", re.Index+1, lines[re.Index], re.Err)
	}
	return err
}

// groupLines returns every group as an ovs-ofctl add-group line, by group
// id, with no counters. restoreGroups reads it back.
func groupLines(of *ofproto.Bridge) []string { return ofptext.GroupLines(of.GroupDescs()) }

// restoreGroups replaces the group table with the groups lines describe
// (groupLines' output, or ovs-ofctl add-group lines, in any order), all or
// nothing (ofproto.Bridge.RestoreGroupMods). Restore the groups before
// the flows.
func restoreGroups(of *ofproto.Bridge, lines []string) error {
	gms := make([]*ofpwire.GroupMod, 0, len(lines))
	for i, l := range lines {
		gm, err := ofptext.ParseGroup(l, ofpwire.GroupAdd, ofptext.ParseFlowOptions{})
		if err != nil {
			return fmt.Errorf("ofproto: restoring group %d: %w", i+1, err)
		}
		gms = append(gms, gm)
	}
	err := of.RestoreGroupMods(gms)
	if re, ok := errors.AsType[*ofproto.RestoreError](err); ok {
		return fmt.Errorf("ofproto: restoring %q: %w", ofptext.FormatGroupMod(gms[re.Index]), re.Err)
	}
	return err
}

// meterLines returns every meter as a one-line ovs-ofctl add-meter
// specification, by meter id. restoreMeters reads it back.
func meterLines(of *ofproto.Bridge) []string { return ofptext.MeterLines(of.MeterMods()) }

// restoreMeters installs the meters lines describe (meterLines' output,
// or ovs-ofctl add-meter lines), replacing a meter of the same id. Every
// line is parsed before anything changes; a meter the table refuses stops
// the restore there (the earlier ones stay). Restore meters before the
// flows that use them.
func restoreMeters(of *ofproto.Bridge, lines []string) error {
	mms := make([]*ofpwire.MeterMod, 0, len(lines))
	for i, l := range lines {
		mm, err := ofptext.ParseMeter(l, ofpwire.MeterAdd)
		if err != nil {
			return fmt.Errorf("ofproto: restoring meter %d: %w", i+1, err)
		}
		mms = append(mms, mm)
	}
	err := of.RestoreMeterMods(mms)
	if re, ok := errors.AsType[*ofproto.RestoreError](err); ok {
		return fmt.Errorf("ofproto: restoring %q: %w", ofptext.FormatMeterMod(mms[re.Index]), re.Err)
	}
	return err
}
