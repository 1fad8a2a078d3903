package actions

import (
	"testing"
	"unsafe"
)

// An action list is walked per packet; a bigger Action is more cache lines
// per megaflow. 32 bytes is two actions per 64-byte line.
func TestActionStaysCompact(t *testing.T) {
	if n := unsafe.Sizeof(Action{}); n > 32 {
		t.Errorf("Action is %d bytes, want at most 32", n)
	}
}

// The constructors put each identifier where its accessor reads it, and
// only Output puts anything in Port.
func TestConstructorsNameTheirArgument(t *testing.T) {
	if a := OutputTo(7); a.Kind != Output || a.Port != 7 || a.Val32 != 0 {
		t.Errorf("OutputTo(7) = %+v", a)
	}
	if a := MeterAction(9); a.Kind != Meter || a.MeterID() != 9 || a.Port != 0 {
		t.Errorf("MeterAction(9) = %+v", a)
	}
	if a := RecircAction(0x11); a.Kind != Recirc || a.RecircID() != 0x11 || a.Port != 0 {
		t.Errorf("RecircAction(0x11) = %+v", a)
	}
	a := ControllerAction(0x30002, 0xc00c1e, 0xfeed)
	if a.Kind != Controller || a.ControllerArg() != 0x30002 || a.ControllerCookie() != 0xc00c1e ||
		a.ControllerMetadata() != 0xfeed || a.Port != 0 {
		t.Errorf("ControllerAction = %+v", a)
	}
}
