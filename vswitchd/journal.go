package vswitchd

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"vswitch/ctl/flowsyntax"
	"vswitch/ofproto/ofpwire"

	"github.com/netrack/openflow/ofp"
)

// JournalSuffix follows a bridge's name to make the file its OpenFlow
// changes are journaled in between two snapshots of its tables.
const JournalSuffix = ".journal"

// A flow table journal makes every acknowledged OpenFlow change durable at
// the cost of one appended line, and one fsync per barrier, instead of a
// rewrite of the whole table: ovs-ofctl sends a barrier after every
// flow-mod, so saving the table at each would make loading N flows cost
// O(N²). The snapshot in the config store plus the journal replayed in
// order give the tables back; the daemon takes a new snapshot and empties
// the journal when the switch is quiet or the journal has grown as large
// as the tables.
type journal struct {
	path    string
	f       *os.File
	records int
	// unsynced is set when lines were appended since the last fsync.
	unsynced bool
}

// openJournal opens (creating) the journal at path and returns the
// complete lines it holds. A last line without its newline was being
// written when the process died; it was never acknowledged and is dropped.
func openJournal(path string) (*journal, []string, error) {
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, err
	}
	if i := bytes.LastIndexByte(data, '\n'); i+1 < len(data) {
		data = data[:i+1]
		if err := os.Truncate(path, int64(len(data))); err != nil {
			return nil, nil, err
		}
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		if l := sc.Text(); l != "" {
			lines = append(lines, l)
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, err
	}
	return &journal{path: path, f: f, records: len(lines)}, lines, nil
}

// append writes one record (one write call, so a crash tears at most the
// last line).
func (j *journal) append(line string) error {
	if _, err := io.WriteString(j.f, line+"\n"); err != nil {
		return err
	}
	j.records++
	j.unsynced = true
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
	j.records, j.unsynced = 0, false
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
		return "flow " + name + " " + flowsyntax.FormatFlowMod(m), nil
	case *ofpwire.GroupMod:
		name, ok := groupCommands[m.Command]
		if !ok {
			return "", fmt.Errorf("group-mod command %d", m.Command)
		}
		return "group " + name + " " + flowsyntax.FormatGroupMod(m), nil
	case *ofpwire.MeterMod:
		name, ok := meterCommands[m.Command]
		if !ok {
			return "", fmt.Errorf("meter-mod command %d", m.Command)
		}
		return "meter " + name + " " + flowsyntax.FormatMeterMod(m), nil
	}
	return "", fmt.Errorf("%T is not a table change", msg)
}

// parseMod reads a journal line back into the message.
func parseMod(line string) (ofpwire.Message, error) {
	kind, rest, _ := strings.Cut(line, " ")
	cmd, spec, _ := strings.Cut(rest, " ")
	switch kind {
	case "flow":
		for c, name := range flowCommands {
			if name == cmd {
				return flowsyntax.ParseFlow(spec, flowsyntax.Command(c))
			}
		}
	case "group":
		for c, name := range groupCommands {
			if name == cmd {
				return flowsyntax.ParseGroup(spec, c, flowsyntax.ParseFlowOptions{})
			}
		}
	case "meter":
		for c, name := range meterCommands {
			if name == cmd {
				return flowsyntax.ParseMeter(spec, c)
			}
		}
	}
	return nil, fmt.Errorf("journal line %q is not FLOW|GROUP|METER COMMAND SPEC", line)
}

var (
	flowCommands = map[ofp.FlowModCommand]string{ofp.FlowAdd: "add", ofp.FlowModify: "modify",
		ofp.FlowModifyStrict: "modify_strict", ofp.FlowDelete: "delete", ofp.FlowDeleteStrict: "delete_strict"}
	groupCommands = map[ofp.GroupCommand]string{ofp.GroupAdd: "add", ofp.GroupModify: "modify", ofp.GroupDelete: "delete"}
	meterCommands = map[ofp.MeterCommand]string{ofp.MeterAdd: "add", ofp.MeterModify: "modify", ofp.MeterDelete: "delete"}
)
