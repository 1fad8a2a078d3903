package vswitchd

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/vswitch-go/vswitch/ofproto"
	"github.com/vswitch-go/vswitch/ofproto/ofptext"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
	"github.com/vswitch-go/vswitch/vswitchd/config"
	"github.com/vswitch-go/vswitch/vswitchd/flowjournal"
)

// A bridge's tables as the daemon saves them (in the bridge's tables file
// and the journal's records): ovs-ofctl lines through ofptext, over the
// bridge's text-free snapshot and restore (ofproto/snapshot.go).

// tablesPath is the path of a bridge's saved tables.
func (d *Daemon) tablesPath(name string) string {
	return filepath.Join(d.opts.StateDir, name+flowjournal.SnapshotSuffix)
}

// moveLegacyTables moves the saved tables an older daemon kept in
// config.json to the bridges' tables files, before the store takes any
// update (which would drop them). A tables file already there is newer:
// a crash came between writing it and config.json.
func moveLegacyTables(dir string, store *config.Store, log *slog.Logger) error {
	legacy := store.LegacyTables()
	if legacy == nil {
		return nil
	}
	for name, t := range legacy {
		path := filepath.Join(dir, name+flowjournal.SnapshotSuffix)
		if _, err := os.Lstat(path); err == nil {
			continue
		}
		if err := flowjournal.WriteSnapshot(path, t); err != nil {
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
