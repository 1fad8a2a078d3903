package unixctl

import (
	"fmt"
	"log/slog"
	"strings"
)

// Open vSwitch's log levels as slog levels. The switch logs at slog's
// four levels; emer, which Open vSwitch keeps for aborts, sits above
// error, so that "-vconsole:emer" silences the console as it does there,
// and off above everything.
const (
	LevelEmer slog.Level = slog.LevelError + 2
	LevelOff  slog.Level = slog.LevelError + 4
)

// The log destinations of Open vSwitch's vlog specs. The daemon writes to
// one: the file with --log-file, else the console; syslog is accepted and
// has nothing to change.
const (
	DestConsole = "console"
	DestSyslog  = "syslog"
	DestFile    = "file"
)

// VlogSpec is one vlog/set or -v argument: a level for a destination
// ("" for every one). Module names are accepted and ignored: the switch
// has one log.
type VlogSpec struct {
	Dest  string
	Level slog.Level
}

// AppliesTo says whether the spec changes the level of destination dest.
func (v VlogSpec) AppliesTo(dest string) bool { return v.Dest == "" || v.Dest == dest }

// ParseVlogSpec reads a spec as Open vSwitch does: words separated by
// spaces, commas or colons, at most one destination and one level among
// them; a spec without a level means dbg. Anything else is a module name
// and is ignored (loosely: Open vSwitch refuses modules it does not have,
// and this switch's modules are not Open vSwitch's). slog's own names
// (debug, error, warning) are accepted too.
func ParseVlogSpec(spec string) (VlogSpec, error) {
	v := VlogSpec{Level: slog.LevelDebug}
	var dest, level string
	for w := range strings.FieldsFuncSeq(strings.ToLower(spec), func(r rune) bool {
		return r == ' ' || r == ',' || r == ':'
	}) {
		var l slog.Level
		isLevel := true
		switch w {
		case "off":
			l = LevelOff
		case "emer":
			l = LevelEmer
		case "err", "error":
			l = slog.LevelError
		case "warn", "warning":
			l = slog.LevelWarn
		case "info":
			l = slog.LevelInfo
		case "dbg", "debug":
			l = slog.LevelDebug
		default:
			isLevel = false
		}
		switch {
		case isLevel:
			if level != "" {
				return VlogSpec{}, fmt.Errorf("vlog spec %q: two levels (%s and %s)", spec, level, w)
			}
			level, v.Level = w, l
		case w == DestConsole || w == DestSyslog || w == DestFile:
			if dest != "" {
				return VlogSpec{}, fmt.Errorf("vlog spec %q: two destinations (%s and %s)", spec, dest, w)
			}
			dest, v.Dest = w, w
		case w == "any":
			// "any" stands for every module or destination.
		case w == "pattern":
			return VlogSpec{}, fmt.Errorf("vlog spec %q: log patterns are not supported (the format is --log-format's)", spec)
		}
	}
	return v, nil
}

// LevelName is a level's name in vlog/list: Open vSwitch's, upper case.
func LevelName(l slog.Level) string {
	switch {
	case l >= LevelOff:
		return "OFF"
	case l >= LevelEmer:
		return "EMER"
	case l >= slog.LevelError:
		return "ERR"
	case l >= slog.LevelWarn:
		return "WARN"
	case l >= slog.LevelInfo:
		return "INFO"
	}
	return "DBG"
}
