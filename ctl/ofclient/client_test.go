package ofclient

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

func TestErrorNames(t *testing.T) {
	for _, c := range []struct {
		typ, code uint16
		want      string
	}{
		{ofpwire.ETBadAction, ofpwire.BACBadOutPort, "OFPBAC_BAD_OUT_PORT"},
		{ofpwire.ETBadAction, ofpwire.BACBadSetArgument, "OFPBAC_BAD_SET_ARGUMENT"},
		{ofpwire.ETBadRequest, ofpwire.BRCMultipartBufferOverflow, "OFPBRC_MULTIPART_BUFFER_OVERFLOW"},
		{ofpwire.ETBadInstruction, ofpwire.BICEperm, "OFPBIC_EPERM"},
		{ofpwire.ETBadMatch, ofpwire.BMCEperm, "OFPBMC_EPERM"},
		{ofpwire.ETFlowModFailed, ofpwire.FMFCBadFlags, "OFPFMFC_BAD_FLAGS"},
		{ofpwire.ETGroupModFailed, ofpwire.GMFCEperm, "OFPGMFC_EPERM"},
		{ofpwire.ETGroupModFailed, ofpwire.GMFCChainedGroup, "OFPGMFC_CHAINED_GROUP"},
		{ofpwire.ETPortModFailed, ofpwire.PMFCEperm, "OFPPMFC_EPERM"},
		{ofpwire.ETTableModFailed, ofpwire.TMFCEperm, "OFPTMFC_EPERM"},
		{ofpwire.ETQueueOpFailed, ofpwire.QOFCEperm, "OFPQOFC_EPERM"},
		{ofpwire.ETSwitchConfigFailed, ofpwire.SCFCEperm, "OFPSCFC_EPERM"},
		{ofpwire.ETRoleRequestFailed, ofpwire.RRFCBadRole, "OFPRRFC_BAD_ROLE"},
		{ofpwire.ETMeterModFailed, ofpwire.MMFCOutOfBands, "OFPMMFC_OUT_OF_BANDS"},
		{ofpwire.ETTableFeaturesFailed, ofpwire.TFFCEperm, "OFPTFFC_EPERM"},
		{ofpwire.ETHelloFailed, ofpwire.HFCEperm, "OFPHFC_EPERM"},
		{ofpwire.ETBadAction, 99, "OFPBAC_99"},
		{77, 3, "OFPET_77/3"},
	} {
		if got := ErrorName(c.typ, c.code); got != c.want {
			t.Errorf("ErrorName(%d, %d) = %s, want %s", c.typ, c.code, got, c.want)
		}
	}
	e := &Error{Type: ofpwire.ETBadAction, Code: ofpwire.BACBadOutPort}
	if !strings.Contains(e.Error(), "OFPBAC_BAD_OUT_PORT") || !errors.Is(e, &ofpwire.OFPError{Type: 2, Code: 4}) {
		t.Fatalf("%v", e)
	}
}

func TestParseTarget(t *testing.T) {
	for _, c := range []struct{ in, net, addr string }{
		{"unix:/run/x.sock", "unix", "/run/x.sock"}, {"tcp:127.0.0.1:6653", "tcp", "127.0.0.1:6653"},
		{"/run/br0.mgmt", "unix", "/run/br0.mgmt"}, {"./s", "unix", "./s"},
	} {
		n, a, err := ParseTarget(c.in)
		if err != nil || n != c.net || a != c.addr {
			t.Errorf("ParseTarget(%q) = %s %s %v", c.in, n, a, err)
		}
	}
	for _, bad := range []string{"br0", "tcp:1.2.3.4", "unix:", "ssl:1.2.3.4:6653"} {
		if _, _, err := ParseTarget(bad); err == nil {
			t.Errorf("ParseTarget(%q) accepted", bad)
		}
	}
}

// fakeSwitch plays the switch side of a net.Pipe with handle answering
// each message the client sends.
func fakeSwitch(t *testing.T, hello ofpwire.Message, helloVersion uint8, handle func(nc net.Conn, h ofpwire.Header, m ofpwire.Message)) net.Conn {
	t.Helper()
	cli, sw := net.Pipe()
	t.Cleanup(func() { sw.Close(); cli.Close() })
	go func() {
		// net.Pipe has no buffer: send our HELLO while reading theirs.
		raw, _ := ofpwire.Encode(1, hello)
		raw[0] = helloVersion
		go sw.Write(raw)
		buf := make([]byte, 1<<16)
		for {
			h, msg, err := ofpwire.ReadMessage(sw, buf)
			if err != nil {
				return
			}
			m, err := ofpwire.Decode(h, msg[ofpwire.HeaderLen:])
			if err != nil {
				return
			}
			if _, ok := m.(*ofpwire.Hello); ok {
				continue
			}
			handle(sw, h, m)
		}
	}()
	return cli
}

func write(nc net.Conn, xid uint32, m ofpwire.Message) {
	raw, err := ofpwire.Encode(xid, m)
	if err != nil {
		panic(err)
	}
	nc.Write(raw)
}

func TestEchoMultipartAndErrors(t *testing.T) {
	echoed := make(chan []byte, 1)
	nc := fakeSwitch(t, ofpwire.NewHello(1, 4, 5), 5, func(sw net.Conn, h ofpwire.Header, m ofpwire.Message) {
		switch m := m.(type) {
		case *ofpwire.EchoReply:
			echoed <- m.Data
		case *ofpwire.MultipartRequest:
			// Ask the client for an echo first: the reader must answer it
			// while a request is pending. Then three parts.
			write(sw, 900, &ofpwire.EchoRequest{Data: []byte("ping")})
			for i := 0; i < 3; i++ {
				r := &ofpwire.MultipartReply{Body: &ofpwire.FlowStatsReply{Flows: []ofpwire.FlowStats{{Priority: uint16(i)}}}}
				if i < 2 {
					r.Flags = ofpwire.MultipartReplyMore
				}
				write(sw, h.Transaction, r)
			}
		case *ofpwire.FlowMod:
			if m.Priority == 13 {
				write(sw, h.Transaction, &ofpwire.ErrorMsg{Type: ofpwire.ETBadAction, Code: ofpwire.BACBadOutPort})
			}
		case *ofpwire.BarrierRequest:
			write(sw, h.Transaction, &ofpwire.BarrierReply{})
		case *ofpwire.FeaturesRequest:
			write(sw, 12345, &ofpwire.PacketIn{}) // unsolicited: dropped
			write(sw, h.Transaction, &ofpwire.FeaturesReply{DatapathID: 42, NumTables: 9})
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := NewClient(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body, err := c.Multipart(ctx, &ofpwire.FlowStatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if fs := body.(*ofpwire.FlowStatsReply).Flows; len(fs) != 3 || fs[2].Priority != 2 {
		t.Fatalf("merged %d flows: %+v", len(fs), fs)
	}
	select {
	case d := <-echoed:
		if string(d) != "ping" {
			t.Fatalf("echo reply %q", d)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("echo request not answered")
	}
	f, err := c.Features(ctx)
	if err != nil || f.DatapathID != 42 || f.NumTables != 9 {
		t.Fatalf("features %+v %v", f, err)
	}
	ok := &ofpwire.FlowMod{Priority: 1}
	bad := &ofpwire.FlowMod{Priority: 13}
	err = c.Transact(ctx, ok, ok, bad, ok)
	var oe *Error
	if !errors.As(err, &oe) || oe.Index != 2 || oe.Name() != "OFPBAC_BAD_OUT_PORT" {
		t.Fatalf("Transact: %v (%+v)", err, oe)
	}
	if err := c.Transact(ctx, ok, ok); err != nil {
		t.Fatal(err)
	}
	if err := c.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestTimeoutAndVersion(t *testing.T) {
	// A switch that never answers: the context bounds the wait.
	nc := fakeSwitch(t, ofpwire.NewHello(4), 4, func(net.Conn, ofpwire.Header, ofpwire.Message) {})
	c, err := NewClient(context.Background(), nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := c.Barrier(ctx); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Fatalf("Barrier against a mute switch: %v after %v", err, time.Since(start))
	}
	c.Close()
	if _, err := c.Features(context.Background()); err == nil {
		t.Fatal("request on a closed client succeeded")
	}

	// An OpenFlow 1.0-only switch is refused.
	nc = fakeSwitch(t, &ofpwire.Hello{}, 1, func(net.Conn, ofpwire.Header, ofpwire.Message) {})
	if _, err := NewClient(context.Background(), nc); err == nil || !strings.Contains(err.Error(), "1.3") {
		t.Fatalf("1.0 switch: %v", err)
	}
	// A 1.5 switch whose bitmap lacks 1.3 is refused too.
	nc = fakeSwitch(t, ofpwire.NewHello(5, 6), 6, func(net.Conn, ofpwire.Header, ofpwire.Message) {})
	if _, err := NewClient(context.Background(), nc); err == nil {
		t.Fatal("switch without 1.3 in its bitmap accepted")
	}
	// A silent peer: the handshake honours the context.
	cli, sw := net.Pipe()
	defer sw.Close()
	go func() { buf := make([]byte, 64); sw.Read(buf) }()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	if _, err := NewClient(ctx2, cli); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("silent peer: %v", err)
	}
}
