package ofproto

import (
	"encoding/binary"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// sendRaw writes hex-encoded message bytes with the client's next xid.
func (c *client) sendRaw(s string) uint32 {
	c.t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		c.t.Fatal(err)
	}
	c.xid++
	binary.BigEndian.PutUint32(b[4:], c.xid)
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
	return c.xid
}

// recvRaw returns the next message that is not an echo request, raw.
func (c *client) recvRaw() (ofpwire.Header, []byte) {
	c.t.Helper()
	for {
		c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		h, raw, err := ofpwire.ReadMessage(c.nc, c.buf)
		if err != nil {
			c.t.Fatal(err)
		}
		if h.Type != ofpwire.TypeEchoRequest {
			return h, append([]byte(nil), raw...)
		}
	}
}

// onfUpdates returns the flow updates of an ONF (1.3) flow monitor
// reply as (event, xid-or-table) pairs.
func onfUpdates(t *testing.T, raw []byte) [][2]uint32 {
	t.Helper()
	if raw[1] != byte(ofpwire.TypeMultipartReply) || binary.BigEndian.Uint32(raw[16:]) != ofpwire.ExperimenterONF {
		t.Fatalf("not an ONF flow monitor reply: %x", raw)
	}
	var out [][2]uint32
	for b := raw[24:]; len(b) >= 8; {
		n := int(binary.BigEndian.Uint16(b))
		ev := uint32(binary.BigEndian.Uint16(b[2:]))
		if ev == 3 {
			out = append(out, [2]uint32{ev, binary.BigEndian.Uint32(b[4:])})
		} else {
			out = append(out, [2]uint32{ev, uint32(b[14])})
		}
		b = b[n:]
	}
	return out
}

// ONF 1.3 monitor request, id 1, all tables, any match, flags as given.
func onfMonitor(flags string) string {
	return "04 12 0030 00000000 ffff 0000 00000000 4f4e4600 0000074e 00000001 " + flags + " 0004 ffffffff ff 000000 0001 0004 00000000"
}

// TestFlowMonitorOwnAbbrevCancel: a monitor without "own" hears of its
// own connection's flow-mod as one ABBREV with the flow-mod's xid, one
// with "own" (another connection) in full; a cancelled monitor hears
// nothing more, and a closed connection's monitors go with it.
func TestFlowMonitorOwnAbbrevCancel(t *testing.T) {
	tb := newTestBridge(t)
	c := tb.c
	x := c.sendRaw(onfMonitor("001f")) // initial add delete modify actions
	if h, raw := c.recvRaw(); h.Transaction != x || len(onfUpdates(t, raw)) != 0 {
		t.Fatalf("initial reply xid %d: %x", h.Transaction, raw)
	}
	c2 := dial(t, "unix", tb.sock)
	x2 := c2.sendRaw(onfMonitor("003f")) // and own
	if h, _ := c2.recvRaw(); h.Transaction != x2 {
		t.Fatalf("initial reply xid %d", h.Transaction)
	}
	if !tb.br.mgr.Monitoring() {
		t.Fatal("not monitoring")
	}

	fx := c.send(outputFlow(1, &ofpwire.ActionOutput{Port: 2}))
	h, raw := c.recvRaw()
	if ups := onfUpdates(t, raw); h.Transaction != 0 || len(ups) != 1 || ups[0] != [2]uint32{3, fx} {
		t.Fatalf("own change: xid %d updates %v", h.Transaction, ups)
	}
	h, raw = c2.recvRaw()
	if ups := onfUpdates(t, raw); h.Transaction != 0 || len(ups) != 1 || ups[0][0] != 0 {
		t.Fatalf("other's change: xid %d updates %v", h.Transaction, ups)
	}

	// Cancelled, c hears nothing of c2's delete before its barrier reply.
	c.sendRaw("04 04 0014 00000000 4f4e4600 0000074e 00000001")
	if bx := c.send(&ofpwire.BarrierRequest{}); true {
		if h, raw := c.recvRaw(); h.Transaction != bx {
			t.Fatalf("cancel answered %x", raw)
		}
	}
	c2.send(&ofpwire.FlowMod{Command: ofpwire.FlowDelete, TableID: 0xff, BufferID: ofpwire.NoBuffer,
		OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny})
	h, raw = c2.recvRaw()
	if ups := onfUpdates(t, raw); len(ups) != 1 || ups[0][0] != 1 {
		t.Fatalf("delete: updates %v", ups)
	}
	bx := c.send(&ofpwire.BarrierRequest{})
	for {
		h, raw := c.recvRaw()
		if h.Transaction == bx {
			break
		}
		if h.Type != ofpwire.TypeFlowRemoved {
			t.Fatalf("cancelled monitor got %x", raw)
		}
	}
	// Cancelling it again: UNKNOWN_MONITOR, in 1.3 as Open vSwitch's
	// Nicira experimenter error 8.
	c.sendRaw("04 04 0014 00000000 4f4e4600 0000074e 00000001")
	if h, raw := c.recvRaw(); h.Type != ofpwire.TypeError || binary.BigEndian.Uint16(raw[8:]) != 0xffff ||
		binary.BigEndian.Uint16(raw[10:]) != 8 || binary.BigEndian.Uint32(raw[12:]) != ofpwire.NXVendor {
		t.Fatalf("second cancel: %x", raw)
	}

	c2.nc.Close()
	deadline := time.Now().Add(5 * time.Second)
	for tb.br.mgr.Monitoring() {
		if time.Now().After(deadline) {
			t.Fatal("closed connection's monitor still counted")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFlowMonitorHeldUpdates: while a connection's updates are held (a
// monitor request being answered) a change reaches it only on release,
// after what it was sent meanwhile.
func TestFlowMonitorHeldUpdates(t *testing.T) {
	tb := newTestBridge(t)
	c := tb.c
	x := c.sendRaw(onfMonitor("001f"))
	if h, _ := c.recvRaw(); h.Transaction != x {
		t.Fatalf("initial reply xid %d", h.Transaction)
	}
	conns := tb.br.mgr.MonitoringConns()
	if len(conns) != 1 {
		t.Fatalf("%d monitoring connections", len(conns))
	}
	conns[0].HoldFlowUpdates()
	c2 := dial(t, "unix", tb.sock)
	c2.send(outputFlow(1, &ofpwire.ActionOutput{Port: 2}))
	c2.request(&ofpwire.BarrierRequest{}) // the change was made
	bx := c.send(&ofpwire.BarrierRequest{})
	if h, raw := c.recvRaw(); h.Transaction != bx {
		t.Fatalf("held update sent: %x", raw)
	}
	conns[0].ReleaseFlowUpdates()
	h, raw := c.recvRaw()
	if ups := onfUpdates(t, raw); h.Transaction != 0 || len(ups) != 1 || ups[0][0] != 0 {
		t.Fatalf("released: xid %d updates %v", h.Transaction, ups)
	}
}
