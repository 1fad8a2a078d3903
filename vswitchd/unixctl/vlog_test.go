package unixctl

import (
	"log/slog"
	"testing"
)

func TestParseVlogSpec(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want VlogSpec
	}{
		{"", VlogSpec{Level: slog.LevelDebug}},
		{"info", VlogSpec{Level: slog.LevelInfo}},
		{"console:emer", VlogSpec{Dest: DestConsole, Level: LevelEmer}},
		{"syslog:err", VlogSpec{Dest: DestSyslog, Level: slog.LevelError}},
		{"file:info", VlogSpec{Dest: DestFile, Level: slog.LevelInfo}},
		{"ANY:ANY:DBG", VlogSpec{Level: slog.LevelDebug}},
		{"vconn:file:warn", VlogSpec{Dest: DestFile, Level: slog.LevelWarn}},
		{"ofproto dbg", VlogSpec{Level: slog.LevelDebug}},
		{"console,off", VlogSpec{Dest: DestConsole, Level: LevelOff}},
		{"file", VlogSpec{Dest: DestFile, Level: slog.LevelDebug}},
	} {
		got, err := ParseVlogSpec(tc.spec)
		if err != nil || got != tc.want {
			t.Errorf("ParseVlogSpec(%q) = %+v, %v; want %+v", tc.spec, got, err, tc.want)
		}
	}
	for _, bad := range []string{"info:dbg", "console:file", "PATTERN:console:%m"} {
		if _, err := ParseVlogSpec(bad); err == nil {
			t.Errorf("ParseVlogSpec(%q) accepted", bad)
		}
	}
}

func TestVlogSpecAppliesTo(t *testing.T) {
	if !(VlogSpec{}).AppliesTo(DestFile) || !(VlogSpec{Dest: DestFile}).AppliesTo(DestFile) || (VlogSpec{Dest: DestConsole}).AppliesTo(DestFile) {
		t.Fatal("AppliesTo wrong")
	}
}

func TestLevelName(t *testing.T) {
	for l, want := range map[slog.Level]string{LevelOff: "OFF", LevelEmer: "EMER", slog.LevelError: "ERR",
		slog.LevelWarn: "WARN", slog.LevelInfo: "INFO", slog.LevelDebug: "DBG"} {
		if got := LevelName(l); got != want {
			t.Errorf("LevelName(%v) = %s, want %s", l, got, want)
		}
	}
}
